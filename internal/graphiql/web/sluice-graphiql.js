// Starts GraphiQL on #graphiql for the Sluice GraphQL endpoint in its
// data-endpoint attribute. Queries and mutations are POSTed as JSON;
// subscriptions use graphql-sse in distinct connections mode (a POST with
// Accept: text/event-stream to the same URL), since Sluice serves no
// WebSocket. Requests go to the page's own origin, so the browser adds the
// Basic credentials it was asked for when it loaded the page; headers typed
// in GraphiQL's header editor (an API token, say) are added to both.
(function () {
  'use strict';

  var el = document.getElementById('graphiql');
  // The page's URL may carry credentials (http://user:secret@host/…):
  // fetch refuses a URL with credentials, and a relative one resolved
  // against the page would carry them, so resolve against the origin.
  var url = new URL(el.getAttribute('data-endpoint'), window.location.origin).href;

  // operationType returns the type of the operation that a request runs:
  // the one named operationName in the query, or its only (else first)
  // operation. It reads the query text itself, not the document GraphiQL
  // passes: that one is parsed after an edit and can be the previous text
  // when a query is run right after it changed.
  function operationType(query, operationName) {
    var tokens = query.match(/"""[\s\S]*?"""|"(?:[^"\\\n]|\\.)*"|#[^\n\r]*|[_A-Za-z][_0-9A-Za-z]*|[^\s,]/g) || [];
    var ops = [];
    var depth = 0;
    var def = null; // the definition whose header is being read
    var wantName = false;
    tokens.forEach(function (t) {
      if (t[0] === '#' || t[0] === '"') {
        return;
      }
      if (depth === 0 && def === null) {
        if (t === 'query' || t === 'mutation' || t === 'subscription' || t === 'fragment') {
          def = { type: t, name: null };
          wantName = true;
          return;
        }
        if (t === '{') {
          def = { type: 'query', name: null };
        }
      }
      if (wantName) {
        wantName = false;
        if (/^[_A-Za-z]/.test(t)) {
          def.name = t;
          return;
        }
      }
      if (t === '{' || t === '(' || t === '[') {
        depth++;
      } else if (t === '}' || t === ')' || t === ']') {
        depth--;
        if (depth === 0 && t === '}' && def !== null) {
          if (def.type !== 'fragment') {
            ops.push(def);
          }
          def = null;
        }
      }
    });
    var op = ops.find(function (o) { return operationName && o.name === operationName; }) || ops[0];
    return op ? op.type : 'query';
  }

  function post(params, headers) {
    var h = Object.assign({
      'Content-Type': 'application/json',
      Accept: 'application/graphql-response+json, application/json',
    }, headers);
    return fetch(url, { method: 'POST', headers: h, body: JSON.stringify(params), credentials: 'same-origin' })
      .then(function (res) {
        return res.text().then(function (text) {
          try {
            return JSON.parse(text);
          } catch (e) {
            return { errors: [{ message: 'HTTP ' + res.status + ': ' + text }] };
          }
        });
      });
  }

  // subscribe returns the events of one subscription as an async iterator.
  // Each subscription gets its own client so that it keeps the headers it
  // was started with; stopping it (GraphiQL calls return) or its end
  // disposes the client, which closes the connection.
  function subscribe(params, headers) {
    var client = graphqlSse.createClient({ url: url, headers: headers, credentials: 'same-origin' });
    var events = client.iterate(params);
    function done(result) {
      client.dispose();
      return result;
    }
    var it = {
      next: function () {
        return events.next().then(function (r) {
          return r.done ? done(r) : r;
        }, function (err) {
          client.dispose();
          throw err;
        });
      },
      return: function () {
        return events.return().then(done, done);
      },
    };
    it[Symbol.asyncIterator] = function () { return it; };
    return it;
  }

  function fetcher(params, opts) {
    var headers = (opts && opts.headers) || {};
    if (operationType(params.query || '', params.operationName) === 'subscription') {
      return subscribe(params, headers);
    }
    return post(params, headers);
  }

  // Every database's page is on the same origin: GraphiQL's tabs, history
  // and settings are kept apart per database by a prefix on their keys.
  var prefix = 'sluice:' + el.getAttribute('data-database') + ':';
  function ownKeys() {
    var keys = [];
    for (var i = 0; i < localStorage.length; i++) {
      var k = localStorage.key(i);
      if (k.indexOf(prefix) === 0) {
        keys.push(k);
      }
    }
    return keys;
  }
  // GraphiQL keeps its history and favourites with the headers each
  // query ran with, whether or not it is set to persist headers (that
  // setting, off by default, covers its tabs only). So a token typed in
  // the Headers pane went to local storage, which the browser writes to
  // disk and keeps, for any later user of the profile and any script of
  // this origin to read. They are stored without headers, and what pages
  // of earlier releases stored loses them as this page loads.
  var historyKey = /:graphiql:(queries|favorites)$/;
  function withoutHeaders(v) {
    var lists;
    try {
      lists = JSON.parse(v);
    } catch (e) {
      return null; // GraphiQL writes JSON: anything else is not kept
    }
    Object.keys(lists || {}).forEach(function (list) {
      if (Array.isArray(lists[list])) {
        lists[list].forEach(function (item) {
          if (item && typeof item === 'object') {
            delete item.headers;
          }
        });
      }
    });
    return JSON.stringify(lists);
  }
  function put(k, v) {
    var kept = historyKey.test(k) ? withoutHeaders(v) : v;
    if (kept === null) {
      localStorage.removeItem(k);
    } else {
      localStorage.setItem(k, kept);
    }
  }
  try {
    var stored = [];
    for (var i = 0; i < localStorage.length; i++) {
      stored.push(localStorage.key(i));
    }
    stored.forEach(function (k) {
      if (k.indexOf('sluice:') === 0 && historyKey.test(k)) {
        put(k, localStorage.getItem(k));
      }
    });
  } catch (e) {
    // Storage is disabled: then nothing was kept in it either.
  }

  var storage = {
    getItem: function (k) { return localStorage.getItem(prefix + k); },
    setItem: function (k, v) { put(prefix + k, v); },
    removeItem: function (k) { localStorage.removeItem(prefix + k); },
    get length() { return ownKeys().length; },
    clear: function () { ownKeys().forEach(function (k) { localStorage.removeItem(k); }); },
  };

  // A new tab opens on a query of the database's first class, rather
  // than GraphiQL's welcome text.
  var props = { fetcher: fetcher, storage: storage };
  var sample = el.getAttribute('data-sample');
  if (sample) {
    props.defaultQuery = sample;
  }
  el.textContent = '';
  ReactDOM.createRoot(el).render(React.createElement(GraphiQL, props));
})();
