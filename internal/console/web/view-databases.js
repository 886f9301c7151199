// /console/: the databases the user can read; create one, delete one
// (admins, after a confirmation).
import { useState } from './preact-hooks.js';
import { dbPath, request } from './api.js';
import { Busy, Confirm, ErrorBox, Link, Notice, Scroll, dbHref, html, navigate, useLoad, useTitle } from './ui.js';
import { forgetDatabase } from './database.js';

export function Databases({ who }) {
  useTitle('Databases');
  const list = useLoad((signal) => request('GET', '/api/db', { signal }).then((r) => r.data), []);
  const [deleting, setDeleting] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');

  const remove = async (d) => {
    setDeleting(null);
    setError(null);
    try {
      await request('DELETE', dbPath('/api/db', d.organization, d.name));
      forgetDatabase(d.organization, d.name);
      setNotice(`Deleted ${d.path}.`);
      list.reload();
    } catch (e) {
      setError(e);
    }
  };

  return html`<h1>Databases</h1>
    <${Notice}>${notice}</${Notice}>
    <${ErrorBox} error=${error} title="Could not delete the database" />
    ${list.loading && !list.data && html`<${Busy}>Loading your databases…</${Busy}>`}
    <${ErrorBox} error=${list.error} title="Could not list your databases"><p><button type="button" onClick=${list.reload}>Retry</button></p></${ErrorBox}>
    ${list.data && (list.data.length === 0
      ? html`<p>You can read no database yet. ${'Create one below.'}</p>`
      : html`<${Scroll} label="Databases"><table>
        <caption class="sr-only">Databases you can read</caption>
        <thead><tr><th scope="col">Database</th><th scope="col">Label</th><th scope="col">Your role</th><th scope="col">Open</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>${list.data.map((d) => html`<tr key=${d.path}>
          <th scope="row"><${Link} href=${dbHref(d.organization, d.name)}>${d.path}</${Link}></th>
          <td>${d.label}${d.comment && html`<div class="muted">${d.comment}</div>`}</td>
          <td>${d.role}</td>
          <td class="links">
            <${Link} href=${dbHref(d.organization, d.name, 'stream')}>Stream</${Link}>
            <${Link} href=${dbHref(d.organization, d.name, 'history')}>History</${Link}>
            <a href=${dbPath('/api/graphiql', d.organization, d.name)} target="_blank" rel="noopener">GraphiQL<span class="sr-only"> for ${d.path} (opens in a new tab)</span></a>
          </td>
          <td>${d.role === 'admin' && html`<button type="button" class="danger small" onClick=${() => setDeleting(d)}>Delete<span class="sr-only"> ${d.path}</span></button>`}</td>
        </tr>`)}</tbody>
      </table></${Scroll}>`)}
    <${CreateDatabase} who=${who} onCreated=${(d) => navigate(dbHref(d.organization, d.name))} />
    ${deleting && html`<${Confirm} title=${`Delete ${deleting.path}?`} expect=${deleting.path} action="Delete the database"
        onConfirm=${() => remove(deleting)} onCancel=${() => setDeleting(null)}>
      <p>This deletes the database with all its documents and history, and ends every stream on it. It cannot be undone.</p>
    </${Confirm}>`}`;
}

function CreateDatabase({ who, onCreated }) {
  const [org, setOrg] = useState(who.org);
  const [name, setName] = useState('');
  const [label, setLabel] = useState('');
  const [comment, setComment] = useState('');
  const [schema, setSchema] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await request('POST', dbPath('/api/db', org, name), { body: { label, comment, schema } });
      onCreated(res.data);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return html`<section aria-labelledby="create-db">
    <h2 id="create-db">Create a database</h2>
    <form onSubmit=${submit} class="grid" aria-busy=${busy}>
      <p><label for="db-org">Organization</label>
        <input id="db-org" value=${org} onInput=${(e) => setOrg(e.target.value)} required readonly=${!who.superuser} spellcheck=${false} autocapitalize="none" aria-describedby=${who.superuser ? undefined : 'db-org-hint'} />
        ${!who.superuser && html`<span id="db-org-hint" class="hint">Your organization: you may create databases in it.</span>`}</p>
      <p><label for="db-name">Name</label>
        <input id="db-name" value=${name} onInput=${(e) => setName(e.target.value)} required spellcheck=${false} autocapitalize="none" /></p>
      <p><label for="db-label">Label (optional)</label>
        <input id="db-label" value=${label} onInput=${(e) => setLabel(e.target.value)} /></p>
      <p><label for="db-comment">Comment (optional)</label>
        <input id="db-comment" value=${comment} onInput=${(e) => setComment(e.target.value)} /></p>
      <p class="wide"><label for="db-schema">Schema (optional GraphQL SDL; you can write it later)</label>
        <textarea id="db-schema" class="code" rows="5" value=${schema} onInput=${(e) => setSchema(e.target.value)} spellcheck=${false} placeholder="type Person { name: String! age: Int }"></textarea></p>
      <div class="wide"><${ErrorBox} error=${error} title="Could not create the database" /></div>
      <p class="wide"><button type="submit" class="primary" disabled=${busy}>${busy ? 'Creating…' : 'Create the database'}</button></p>
    </form>
  </section>`;
}
