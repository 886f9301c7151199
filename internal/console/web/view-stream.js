// /console/{org}/{db}/stream: every commit as it is committed, on any
// replica, through a GraphQL _ChangeSet subscription (server-sent events
// read with fetch, so that the credential goes in a header). Pausing
// closes the stream and keeps the position of the last event; resuming
// opens it again from there, so the commits made meanwhile arrive, none
// missed and none twice.
import { useEffect, useRef, useState } from './preact-hooks.js';
import { ApiError, dbPath, request, stream } from './api.js';
import { Busy, ErrorBox, Link, When, dbHref, html, show, useLoad, useTitle } from './ui.js';
import { countFields, loadModel, selection } from './model.js';

const keep = 200; // commits shown; older ones are dropped from the page
// The changes kept of each commit, each as its id and a line of its
// fields, never its document: a writer's import of thousands of
// documents a commit, kept whole for 200 commits, took the tab's memory.
// The commit's Old and new values (the History view) shows them all.
const shownChanges = 20;
const ops = ['added', 'updated', 'deleted'];

// changeSetQuery returns the subscription: per class its documents added,
// updated and deleted (own documents only: a subclass has its own lists),
// with their fields when the query stays within the daemon's limits.
function changeSetQuery(model) {
  const docs = (c, full) => `_id ${full ? selection(model, c.fields, 1) : ''}`;
  const build = (full) => `subscription { _ChangeSet(include_children: false) {
    _CommitMetadata { _id _user _author _message _datetime }
    ${model.classes.map((c) => ops.map((op) => `${c.name}_${op} { ${docs(c, full)} }`).join(' ')).join('\n')}
  } }`;
  const full = build(true);
  return countFields(full) <= 900 ? full : build(false);
}

export function Stream({ org, db }) {
  useTitle('Stream', `${org}/${db}`);
  const model = useLoad(() => loadModel(org, db), [org, db]);
  const [commits, setCommits] = useState([]);
  const [status, setStatus] = useState('connecting'); // connecting | live | paused | ended | error
  const [error, setError] = useState(null);
  // A commit the stream could not carry (past a limit of an event): the
  // stream goes on, so it is no failure of the stream.
  const [skipped, setSkipped] = useState(null);
  const [running, setRunning] = useState(true);
  const last = useRef(''); // the position of the last event received
  const received = useRef(0);
  const [attempt, setAttempt] = useState(0);
  // The running stream's controller: Pause aborts it at once, since the
  // effect's cleanup runs only after the next render is painted, and an
  // event arriving meanwhile would show after "Paused".
  const current = useRef(null);

  useEffect(() => {
    if (!model.data || !running) return undefined;
    const ctl = new AbortController();
    current.current = ctl;
    let retry = null;
    // The error of the last event, if it was one: an error followed by
    // the stream's end is a refusal (access taken away, a position no
    // longer kept); one followed by more events was a commit the stream
    // could not carry.
    let lastError = null;
    setStatus('connecting');
    setError(null);
    setSkipped(null);
    const q = changeSetQuery(model.data);
    // The stream starts from the position of a read made first, so that
    // a pause before any event still resumes from where it opened.
    const start = last.current ? Promise.resolve() : request('GET', `${dbPath('/api/log', org, db)}?count=1`, { signal: ctl.signal })
      .then((r) => { last.current = r.headers.get('Sluice-Position') || ''; });
    start.then(() => stream(dbPath('/api/graphql', org, db), { method: 'POST', body: { query: q }, lastEventId: last.current, signal: ctl.signal },
      () => setStatus('live'),
      (ev) => {
        if (ctl.signal.aborted || ev.event === 'complete') return;
        if (ev.event !== 'next') return;
        if (ev.id) last.current = ev.id;
        const payload = JSON.parse(ev.data);
        if (payload.errors?.length) {
          lastError = new Error(payload.errors.map((e) => e.message).join('; '));
          setSkipped(lastError);
          return;
        }
        lastError = null;
        const cs = payload.data?._ChangeSet;
        if (!cs) return;
        received.current++;
        const changes = [];
        let total = 0;
        for (const c of model.data.classes) {
          for (const op of ops) {
            for (const d of cs[`${c.name}_${op}`] || []) {
              if (total++ < shownChanges) changes.push({ op, cls: c.name, id: d._id, summary: summary(d) });
            }
          }
        }
        setCommits((all) => [{ position: ev.id, meta: cs._CommitMetadata, changes, total }, ...all].slice(0, keep));
      })).then(() => {
      if (ctl.signal.aborted) return;
      // A stream that ends without an error (Sluice restarting, a
      // replica going away) is resumed from its position; one that
      // ended with an error (access taken away) is not.
      if (lastError) {
        setSkipped(null);
        setError(lastError);
        setStatus('error');
        return;
      }
      setStatus('ended');
      retry = setTimeout(() => setAttempt((a) => a + 1), 3000);
    }, (err) => {
      if (ctl.signal.aborted || err?.name === 'AbortError') return;
      setError(err);
      setStatus('error');
      // Lost connections are resumed from the last position; refusals
      // (401, 403, 404) are not retried.
      if (err instanceof ApiError && (err.status === 0 || err.status >= 500 || err.status === 429)) {
        retry = setTimeout(() => setAttempt((a) => a + 1), 3000);
      }
    });
    return () => {
      ctl.abort();
      clearTimeout(retry);
    };
  }, [model.data, running, attempt]);

  const pause = () => {
    current.current?.abort();
    setRunning(false);
    setStatus('paused');
  };
  const resume = () => {
    setRunning(true);
    setAttempt((a) => a + 1);
  };
  const label = {
    connecting: 'Connecting…',
    live: 'Live: commits appear as they are made.',
    paused: `Paused${last.current ? ` at position ${last.current}` : ''}: resume to receive what was committed meanwhile.`,
    ended: 'The stream ended; reconnecting from its position…',
    error: 'The stream stopped.',
  }[status];
  return html`<h1>Stream <span class="muted">of ${org}/${db}</span></h1>
    <${ErrorBox} error=${model.error} title="Could not read the classes" />
    ${model.loading && !model.data && html`<${Busy}>Reading the classes…</${Busy}>`}
    ${model.data && html`<div class="toolbar">
      <span class=${`state ${status}`} role="status">${label}</span>
      ${running && status !== 'error' ? html`<button type="button" onClick=${pause}>Pause</button>`
        : html`<button type="button" class="primary" onClick=${resume}>${status === 'paused' ? 'Resume' : 'Reconnect'}</button>`}
      ${commits.length > 0 && html`<button type="button" onClick=${() => { setCommits([]); setSkipped(null); }}>Clear</button>`}
    </div>
    ${skipped && html`<div class="error" role="alert"><p><strong>A commit cannot be shown here:</strong> ${skipped.message}</p>
      <p>The stream goes on. The History view shows every commit, a page of its changes at a time.</p></div>`}
    <${ErrorBox} error=${error} title="The stream failed">
      ${error instanceof ApiError && error.status === 0 && running && html`<p>Reconnecting from the last position…</p>`}
    </${ErrorBox}>
    <p class="sr-only" aria-live="polite">${received.current ? `${received.current} commits received` : ''}</p>
    ${commits.length === 0 ? html`<p class="muted">No commit yet since the stream opened. Write something (here, with curl or from an application, on any replica) and it shows up here.</p>`
      : html`<ol class="commits" aria-label="Commits, newest first">${commits.map((c) => html`<li key=${c.position}>
        <div class="commit-head">
          <strong>Commit ${c.meta?._id}</strong> <${When} at=${c.meta?._datetime} />
          ${c.meta?._user && html` · by ${c.meta._user}`}
          ${c.meta?._author && html` · <span class="muted">author given: <bdi>${c.meta._author}</bdi></span>`}${c.meta?._message && html` · “<bdi>${c.meta._message}</bdi>”`}
          ${' · '}<${Link} href=${`${dbHref(org, db, 'history')}?commit=${encodeURIComponent(c.meta?._id)}`}>Old and new values</${Link}>
        </div>
        <ul class="changes">${c.changes.map((ch) => html`<li>
          <span class=${`op ${ch.op}`}>${ch.op}</span>
          ${ch.op === 'deleted' ? ch.id : html`<${Link} href=${`${dbHref(org, db, `documents/${encodeURIComponent(ch.cls)}`)}?open=${encodeURIComponent(ch.id)}`}>${ch.id}</${Link}>`}
          <span class="muted"> ${ch.summary}</span>
        </li>`)}</ul>
        ${c.total > c.changes.length && html`<p class="muted">…and ${(c.total - c.changes.length).toLocaleString()} more changes, in its <${Link} href=${`${dbHref(org, db, 'history')}?commit=${encodeURIComponent(c.meta?._id)}`}>old and new values</${Link}>.</p>`}
      </li>`)}</ol>`}
    `}`;
}

// summary returns a document's fields, shortened, for one line.
function summary(doc) {
  let s = '';
  for (const [k, v] of Object.entries(doc)) {
    if (k === '_id' || v === null || v === undefined) continue;
    s += `${s ? ', ' : ''}${k}: ${show(v).slice(0, 200)}`;
    if (s.length > 200) return `${own(s.slice(0, 199))}…`;
  }
  return own(s);
}

// own returns a copy of s, a short string, that holds nothing else: V8
// makes a slice of a string a view of the whole it was cut from, so a
// line cut from a long value would keep the value alive.
const own = (s) => [...s].join('');
