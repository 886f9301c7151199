// The console's only way to the daemon: its public API, with the
// credential the user signed in with. The credential lives in this
// module's memory only, never in sessionStorage or localStorage: Chromium
// writes session storage to the profile on disk and restores it with the
// tab after a restart, and removing an item leaves its old bytes in the
// file. So a reload or a new tab asks the user to sign in again. The
// credential is sent in the Authorization header and never put in a URL.
// Requests are made with credentials: 'omit', so the browser adds nothing
// it remembers by itself (such as Basic credentials typed into GraphiQL's
// prompt) and never shows its own sign-in prompt on a 401.

let current = null; // { authorization, user, org, superuser, version }
const listeners = new Set();

// Consoles before this one kept the credential in sessionStorage under
// this key: remove it, so that a tab signed in with one of them stops
// restoring it. (The browser may keep the old bytes on disk until it
// compacts the file, but no longer gives them back.)
try {
  sessionStorage.removeItem('sluice-console-credential');
} catch {
  // Storage is disabled: then nothing was kept in it either.
}

// session returns who is signed in, or null.
export function session() {
  return current;
}

// onSession calls fn whenever the user signs in or out; it returns a
// function that stops that.
export function onSession(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function changed() {
  for (const fn of listeners) fn(current);
}

// signIn checks a credential with GET /api/info and keeps it. kind is
// 'password' (with user and secret) or 'token' (an API token or a JWT).
export async function signIn(kind, user, secret) {
  let authorization;
  if (kind === 'password') {
    // btoa takes Latin-1 only: encode the UTF-8 bytes, as curl does.
    const bytes = new TextEncoder().encode(`${user}:${secret}`);
    authorization = 'Basic ' + btoa(String.fromCharCode(...bytes));
  } else {
    const token = secret.trim().replace(/^bearer\s+/i, '');
    // A header carries Latin-1 only, and no line break: fetch refuses
    // anything else before sending. Tokens and JWTs are ASCII, so such a
    // character was pasted with the token (a curly quote, say).
    const bad = /[^\t\x20-\x7e\x80-\xff]/u.exec(token);
    if (bad) {
      const ch = bad[0];
      const code = `U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
      throw new ApiError(0, 'request', `The token holds a character that a header cannot carry: ${ch < ' ' ? 'a line break or control character' : /\s/u.test(ch) ? 'a special space' : `“${ch}”`} (${code}), at character ${[...token.slice(0, bad.index)].length + 1}.`);
    }
    authorization = 'Bearer ' + token;
  }
  const res = await request('GET', '/api/info', { authorization });
  const info = res.data;
  current = { authorization, user: info.user, org: info.org, superuser: !!info.superuser, version: info.version };
  changed();
  return current;
}

// signOut forgets the credential.
export function signOut(reason) {
  current = null;
  signOutReason = reason || '';
  changed();
}

let signOutReason = '';

// takeSignOutReason returns why the user was signed out (once).
export function takeSignOutReason() {
  const r = signOutReason;
  signOutReason = '';
  return r;
}

// ApiError is a failed request: status (0 when Sluice could not be
// reached, or the browser could not make the request: type 'network' or
// 'request'), type (the API's error type, such as api:Conflict), the
// API's message, and advice saying what the user can do.
export class ApiError extends Error {
  constructor(status, type, message, { body = null, headers = null } = {}) {
    super(message);
    this.status = status;
    this.type = type;
    this.body = body;
    this.headers = headers;
  }

  get advice() {
    switch (this.status) {
      case 0: return this.type === 'request'
        ? 'API tokens and JWTs are plain ASCII: copy the token again from where it was made (a word processor or chat may turn quotes into curly ones), and paste it here.'
        : 'Sluice could not be reached: check that it is running and that this computer is online, then retry.';
      case 401: return 'Sign in again.';
      case 403: return 'Your role on this database does not allow this; ask an admin of the database for a role that does.';
      case 404: return 'It may have been deleted, or you may have no access to it.';
      case 409: return 'Read what is there now, then try again.';
      case 410: return 'That part of the history is no longer kept.';
      case 412: return 'Someone changed it since you read it: read it again.';
      case 413: return 'The request is larger than the daemon accepts (max_body_bytes).';
      case 429: {
        const after = this.headers?.get('Retry-After');
        return after ? `Too many requests: wait ${after} seconds, then retry.` : 'Too many requests: wait a little, then retry.';
      }
      case 503: return 'Sluice or its Postgres is unavailable for now: retry in a moment.';
      default: return this.status >= 500 ? 'Sluice failed to answer: retry, and look at its log if it fails again.' : '';
    }
  }
}

// send fetches path (below the daemon's origin) with init. The path is
// resolved against the page's origin, not its address: the address may
// carry credentials (http://user:secret@host/console/), and fetch refuses
// a URL with credentials, which a path resolved against the address
// would carry. A request the browser refuses to make (a header value
// that is not Latin-1, such as a token with a curly quote: a TypeError
// from Request) is an ApiError of type 'request'; a failure to reach the
// daemon (a TypeError from fetch) one of type 'network'.
async function send(path, init) {
  let req;
  try {
    req = new Request(new URL(path, location.origin), init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'request', `The browser could not make the request: ${e.message}`);
  }
  try {
    return await fetch(req);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', 'Sluice could not be reached.');
  }
}

// request sends one request to the daemon and returns { status, headers,
// data } (data: the parsed JSON body, or the text for other types). Any
// answer but 2xx (and 304) throws an ApiError; a 401 also signs the user
// out, unless opts.authorization was given (sign-in checks a credential).
// opts: body (a string, or an object sent as JSON), headers, authorization,
// signal.
export async function request(method, path, opts = {}) {
  const headers = { Accept: 'application/json', ...(opts.headers || {}) };
  const authorization = opts.authorization || session()?.authorization;
  if (authorization) headers.Authorization = authorization;
  let body = opts.body;
  if (body !== undefined && typeof body !== 'string') {
    body = JSON.stringify(body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await send(path, { method, headers, body, credentials: 'omit', cache: 'no-store', signal: opts.signal });
  const type = res.headers.get('Content-Type') || '';
  let data = null;
  if (res.status !== 204 && res.status !== 304) {
    const text = await res.text();
    data = text;
    if (/json/.test(type)) {
      try {
        data = JSON.parse(text);
      } catch {
        data = text;
      }
    }
  }
  if (res.ok || res.status === 304) return { status: res.status, headers: res.headers, data };
  const message = (data && data['api:message']) || (typeof data === 'string' && data.trim()) || `${res.status} ${res.statusText}`;
  const err = new ApiError(res.status, data?.['api:error']?.['@type'] || '', message, { body: data, headers: res.headers });
  if (res.status === 401 && !opts.authorization && session()) signOut(`${message} Sign in again.`);
  throw err;
}

// dbPath returns the URL path of database org/name below an API prefix.
export const dbPath = (prefix, org, db) => `${prefix}/${encodeURIComponent(org)}/${encodeURIComponent(db)}`;

// GraphQLError is a GraphQL answer with errors: message is the first
// error's, errors all of them.
export class GraphQLError extends Error {
  constructor(errors) {
    super(errors.map((e) => e.message).join('; '));
    this.errors = errors;
    this.code = errors[0]?.extensions?.code || '';
  }
}

// graphql runs a query or mutation on database org/db and returns its
// data and extensions; errors throw a GraphQLError.
export async function graphql(org, db, query, variables = {}, opts = {}) {
  const res = await request('POST', dbPath('/api/graphql', org, db), {
    body: { query, variables },
    headers: { Accept: 'application/graphql-response+json, application/json' },
    signal: opts.signal,
  }).catch((e) => {
    // A GraphQL request error (400) carries GraphQL errors in its body.
    if (e instanceof ApiError && Array.isArray(e.body?.errors)) throw new GraphQLError(e.body.errors);
    throw e;
  });
  if (res.data?.errors?.length) throw new GraphQLError(res.data.errors);
  return { data: res.data.data, extensions: res.data.extensions || {} };
}

// stream follows a server-sent event stream with fetch, which, unlike
// EventSource, can send the Authorization header. It calls onOpen once
// the stream is connected (Sluice's first comment, written once the
// subscription is registered), onEvent({id, event, data}) for each event,
// and resolves when the stream ends (or signal aborts it); a failure to
// open rejects with an ApiError. opts: method, body, lastEventId, signal.
export async function stream(path, opts, onOpen, onEvent) {
  const headers = { Accept: 'text/event-stream' };
  const s = session();
  if (s) headers.Authorization = s.authorization;
  if (opts.lastEventId) headers['Last-Event-ID'] = opts.lastEventId;
  let body;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['Content-Type'] = 'application/json';
  }
  let res;
  try {
    res = await send(path, { method: opts.method || 'GET', headers, body, credentials: 'omit', cache: 'no-store', signal: opts.signal });
  } catch (e) {
    if (e.name === 'AbortError') return;
    throw e;
  }
  if (!res.ok) {
    let data = null;
    try {
      data = await res.json();
    } catch {
      // not JSON
    }
    if (res.status === 401) signOut('Your credential was refused. Sign in again.');
    throw new ApiError(res.status, data?.['api:error']?.['@type'] || '', data?.['api:message'] || `${res.status} ${res.statusText}`, { body: data, headers: res.headers });
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let opened = false;
  let ev = { id: '', event: '', data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
        if (line === '') {
          if (ev.data.length || ev.event) onEvent({ id: ev.id, event: ev.event || 'message', data: ev.data.join('\n') });
          ev = { id: ev.id, event: '', data: [] };
          continue;
        }
        if (line.startsWith(':')) {
          if (!opened) {
            opened = true;
            onOpen?.();
          }
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const v = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') ev.data.push(v);
        else if (field === 'event') ev.event = v;
        else if (field === 'id') ev.id = v;
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') return;
    throw new ApiError(0, 'network', 'The connection to Sluice was lost.');
  }
}
