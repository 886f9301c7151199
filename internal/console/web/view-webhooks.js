// /console/{org}/{db}/webhooks: the database's webhooks with their state,
// their last attempts and errors; create, pause, resume, replay from a
// position, delete. Admins of the database manage webhooks; others are
// told so.
import { useState } from './preact-hooks.js';
import { dbPath, request } from './api.js';
import { Busy, Confirm, ErrorBox, Notice, Scroll, When, html, query, navigate, useLoad, useTitle, withQuery } from './ui.js';
import { can, loadDatabase } from './database.js';
import { loadModel } from './model.js';

export function Webhooks({ org, db }) {
  useTitle('Webhooks', `${org}/${db}`);
  const info = useLoad(() => loadDatabase(org, db), [org, db]);
  const base = dbPath('/api/webhooks', org, db);
  const admin = can(info.data?.role, 'admin');
  const list = useLoad((signal) => (admin ? request('GET', base, { signal }).then((r) => r.data) : Promise.resolve(null)), [org, db, admin]);
  const open = query().get('hook') || '';
  const [created, setCreated] = useState(null);
  if (info.data && !admin) {
    return html`<h1>Webhooks <span class="muted">of ${org}/${db}</span></h1>
      <p>Only admins of the database see and manage its webhooks; your role is ${info.data.role}.</p>`;
  }
  return html`<h1>Webhooks <span class="muted">of ${org}/${db}</span></h1>
    <p class="muted">A webhook POSTs every commit of the database to a URL, in order, signed; failures are retried, then the webhook pauses with its position kept.</p>
    <${ErrorBox} error=${info.error || list.error} title="Could not read the webhooks" />
    ${(info.loading || list.loading) && !list.data && html`<${Busy}>Reading the webhooks…</${Busy}>`}
    ${created && html`<div class="notice" role="status"><p><strong>Webhook ${created.id} created.</strong> Its signing secret is shown this once: store it with the receiver.</p>
      <p><code class="secret">${created.secret}</code></p><p><button type="button" onClick=${() => setCreated(null)}>I stored it</button></p></div>`}
    ${list.data && (list.data.length === 0 ? html`<p>No webhook yet.</p>` : html`<${Scroll} label="Webhooks"><table>
      <thead><tr><th scope="col">Webhook</th><th scope="col">URL</th><th scope="col">State</th><th scope="col">Position</th><th scope="col" class="num">Delivered</th><th scope="col" class="num">Failed attempts</th><th scope="col">Last success</th></tr></thead>
      <tbody>${list.data.map((w) => html`<tr key=${w.id} class=${String(w.id) === open ? 'selected' : ''}>
        <th scope="row"><a href=${withQuery({ hook: w.id })} onClick=${(e) => { e.preventDefault(); navigate(withQuery({ hook: w.id })); }}>${w.id}${w.description ? ` · ${w.description}` : ''}</a></th>
        <td class="wrap">${w.url}</td>
        <td><span class=${`state ${w.status}`}>${w.status}</span>${w.status_message && html`<div class="muted">${w.status_message}</div>`}</td>
        <td><code>${w.position}</code></td>
        <td class="num">${w.delivered}</td><td class="num">${w.failed}</td>
        <td><${When} at=${w.last_success_at} /></td>
      </tr>`)}</tbody></table></${Scroll}>`)}
    ${open && html`<${Webhook} key=${open} base=${base} id=${open} onChanged=${list.reload} onClose=${() => navigate(withQuery({ hook: null }))} />`}
    ${admin && html`<${CreateWebhook} org=${org} db=${db} base=${base} onCreated=${(w) => { setCreated(w); list.reload(); }} />`}`;
}

function Webhook({ base, id, onChanged, onClose }) {
  const path = `${base}/${encodeURIComponent(id)}`;
  const hook = useLoad((signal) => request('GET', path, { signal }).then((r) => r.data), [path]);
  const [after, setAfter] = useState('');
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState('');
  const [deleting, setDeleting] = useState(false);
  const act = async (what, method, sub, body) => {
    setBusy(what);
    setError(null);
    setNotice('');
    try {
      await request(method, `${path}${sub}`, body === undefined ? {} : { body });
      setNotice({ pause: 'Paused.', resume: 'Resumed.', replay: `Delivery goes on from ${after}.`, delete: 'Deleted.' }[what]);
      if (what === 'delete') {
        onChanged();
        onClose();
        return;
      }
      hook.reload();
      onChanged();
    } catch (err) {
      setError(err);
    }
    setBusy('');
  };
  const w = hook.data;
  return html`<section class="panel" aria-labelledby="hook-title">
    <div class="panel-head"><h2 id="hook-title">Webhook ${id}</h2><button type="button" onClick=${onClose}>Close<span class="sr-only"> the webhook</span></button></div>
    ${hook.loading && !w && html`<${Busy}>Reading the webhook…</${Busy}>`}
    <${ErrorBox} error=${hook.error} title="Could not read the webhook" />
    ${w && html`<dl class="meta">
      <dt>URL</dt><dd class="wrap">${w.url}</dd>
      <dt>State</dt><dd>${w.status}${w.status_message && ` — ${w.status_message}`}</dd>
      <dt>Classes</dt><dd>${w.classes ? w.classes.join(', ') : 'all'}</dd>
      <dt>Operations</dt><dd>${(w.ops || []).join(', ') || 'all'}</dd>
      <dt>Position</dt><dd><code>${w.position}</code></dd>
      <dt>Lag</dt><dd>${w.lag ? `${w.lag.commits} commits, ${Number(w.lag.seconds).toFixed(1)} s` : '—'}</dd>
      <dt>Next attempt</dt><dd><${When} at=${w.next_attempt_at} /></dd>
      <dt>Delivers as</dt><dd>${w.creator}</dd>
    </dl>
    <p class="actions">
      ${w.state === 'active' ? html`<button type="button" disabled=${!!busy} onClick=${() => act('pause', 'POST', '/pause')}>Pause</button>`
        : html`<button type="button" class="primary" disabled=${!!busy} onClick=${() => act('resume', 'POST', '/resume')}>Resume</button>`}
      <button type="button" class="danger" disabled=${!!busy} onClick=${() => setDeleting(true)}>Delete</button>
    </p>
    <form class="row" onSubmit=${(e) => { e.preventDefault(); act('replay', 'POST', '/replay', { after }); }}>
      <p class="grow"><label for="replay-after">Replay from a position</label>
        <input id="replay-after" class="code" value=${after} onInput=${(e) => setAfter(e.target.value)} required spellcheck=${false} aria-describedby="replay-hint" />
        <span id="replay-hint" class="hint">An event id, a webhook-id or a read's position (a commit's position in the History view): delivery goes on after it, in order.</span></p>
      <p><button type="submit" disabled=${!!busy}>Replay</button></p>
    </form>
    <${ErrorBox} error=${error} title="Could not change the webhook" />
    <${Notice}>${notice}</${Notice}>
    <h3>Last attempts</h3>
    ${(w.attempts || []).length === 0 ? html`<p>No attempt yet.</p>` : html`<${Scroll} label="Last attempts"><table>
      <thead><tr><th scope="col">Time</th><th scope="col">Message</th><th scope="col" class="num">Events</th><th scope="col" class="num">Try</th><th scope="col">Answer</th><th scope="col">Error</th><th scope="col" class="num">ms</th></tr></thead>
      <tbody>${w.attempts.map((a) => html`<tr key=${a.n}>
        <td><${When} at=${a.at} /></td><td><code>${a.message_id}</code></td><td class="num">${a.events}</td><td class="num">${a.attempt}</td>
        <td class=${a.status >= 200 && a.status < 300 ? 'ok' : 'bad'}>${a.status || 'none'}${a.response && html`<div class="muted wrap">${a.response}</div>`}</td>
        <td class="wrap">${a.error}</td><td class="num">${a.duration_ms}</td>
      </tr>`)}</tbody></table></${Scroll}>`}`}
    ${deleting && html`<${Confirm} title=${`Delete webhook ${id}?`} action="Delete the webhook" onConfirm=${() => { setDeleting(false); act('delete', 'DELETE', ''); }} onCancel=${() => setDeleting(false)}>
      <p>Nothing more is delivered to ${w?.url}.</p></${Confirm}>`}
  </section>`;
}

function CreateWebhook({ org, db, base, onCreated }) {
  const model = useLoad(() => loadModel(org, db), [org, db]);
  const [url, setURL] = useState('');
  const [description, setDescription] = useState('');
  const [classes, setClasses] = useState([]);
  const [ops, setOps] = useState(['create', 'update', 'delete']);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const toggle = (list, set, v) => set(list.includes(v) ? list.filter((x) => x !== v) : [...list, v]);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = { url, description, ops };
      if (classes.length) body.classes = classes;
      const res = await request('POST', base, { body });
      setURL('');
      setDescription('');
      onCreated(res.data);
    } catch (err) {
      setError(err);
    }
    setBusy(false);
  };
  return html`<section aria-labelledby="new-hook">
    <h2 id="new-hook">Create a webhook</h2>
    <form onSubmit=${submit} class="grid" aria-busy=${busy}>
      <p class="wide"><label for="hook-url">URL</label><input id="hook-url" type="url" value=${url} onInput=${(e) => setURL(e.target.value)} required placeholder="https://hooks.example.com/sluice" /></p>
      <p class="wide"><label for="hook-description">Description (optional)</label><input id="hook-description" value=${description} onInput=${(e) => setDescription(e.target.value)} /></p>
      <fieldset><legend>Classes (none checked: all)</legend>
        ${(model.data?.classes || []).map((c) => html`<label class="inline"><input type="checkbox" checked=${classes.includes(c.name)} onChange=${() => toggle(classes, setClasses, c.name)} /> ${c.name}</label>`)}
      </fieldset>
      <fieldset><legend>Operations</legend>
        ${['create', 'update', 'delete'].map((o) => html`<label class="inline"><input type="checkbox" checked=${ops.includes(o)} onChange=${() => toggle(ops, setOps, o)} /> ${o}</label>`)}
      </fieldset>
      <div class="wide"><${ErrorBox} error=${error} title="Could not create the webhook" /></div>
      <p class="wide"><button type="submit" class="primary" disabled=${busy || ops.length === 0}>${busy ? 'Creating…' : 'Create the webhook'}</button></p>
    </form>
  </section>`;
}
