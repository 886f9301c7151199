// /console/{org}/{db}: the database's classes with their document counts,
// and its schema, which admins change after the schema API's preview of
// what the change does.
import { useState } from './preact-hooks.js';
import { ApiError, GraphQLError, dbPath, graphql, request } from './api.js';
import { Busy, ErrorBox, Link, Notice, Scroll, dbHref, dict, html, own, useLoad, useTitle } from './ui.js';
import { can, forgetDatabase, loadDatabase } from './database.js';
import { loadModel } from './model.js';
import { Roles } from './view-roles.js';

// counts returns each class's document count (subclasses included), one
// aggregate per class, in requests of at most 20 aggregates: each runs a
// statement of its own, and a request may run graphql_max_statements
// (25 unless the server lowers it). A server that allows fewer: a request
// refused for that limit is split in two, down to one class a request.
async function counts(org, db, classes, signal) {
  const out = dict(); // class names are the user's
  for (let i = 0; i < classes.length; i += 20) {
    await countPart(org, db, classes.slice(i, i + 20), signal, out);
  }
  return out;
}

async function countPart(org, db, part, signal, out) {
  const q = `{ ${part.map((c, j) => `c${j}: ${c.name}_aggregate { count }`).join(' ')} }`;
  let data;
  try {
    ({ data } = await graphql(org, db, q, {}, { signal }));
  } catch (e) {
    const tooMany = e instanceof GraphQLError && e.errors.some((x) => x.extensions?.limit === 'graphql_max_statements');
    if (!tooMany || part.length === 1) throw e;
    const half = Math.ceil(part.length / 2);
    await countPart(org, db, part.slice(0, half), signal, out);
    await countPart(org, db, part.slice(half), signal, out);
    return;
  }
  part.forEach((c, j) => { out[c.name] = data[`c${j}`].count; });
}

export function Database({ who, org, db }) {
  useTitle('Classes and schema', `${org}/${db}`);
  const info = useLoad(() => loadDatabase(org, db), [org, db]);
  const model = useLoad(() => loadModel(org, db), [org, db]);
  const count = useLoad((signal) => loadModel(org, db).then((m) => counts(org, db, m.classes, signal)), [org, db]);
  const sdl = useLoad((signal) => request('GET', dbPath('/api/schema', org, db), { signal, headers: { Accept: 'application/graphql, */*' } }).then((r) => r.data), [org, db]);
  const role = info.data?.role;
  const changed = () => {
    forgetDatabase(org, db);
    info.reload();
    model.reload();
    count.reload();
    sdl.reload();
  };

  return html`<h1>${org}/${db}${info.data?.label && html` <span class="muted">${info.data.label}</span>`}</h1>
    <${ErrorBox} error=${info.error} title="Could not open the database" />
    ${info.data && html`<p class="muted"><bdi>${info.data.comment}</bdi> Your role: <strong>${role}</strong>. Schema version ${info.data.schema_version}.</p>`}
    <section aria-labelledby="classes">
      <h2 id="classes">Classes</h2>
      ${model.loading && !model.data && html`<${Busy}>Reading the classes…</${Busy}>`}
      <${ErrorBox} error=${model.error || count.error} title="Could not read the classes" />
      ${model.data && (model.data.classes.length === 0
        ? html`<p>No classes yet${can(role, 'admin') ? ': write a schema below.' : '.'}</p>`
        : html`<${Scroll} label="Classes"><table>
          <thead><tr><th scope="col">Class</th><th scope="col" class="num">Documents</th><th scope="col">Fields</th></tr></thead>
          <tbody>${model.data.classes.map((c) => html`<tr key=${c.name}>
            <th scope="row"><${Link} href=${dbHref(org, db, `documents/${encodeURIComponent(c.name)}`)}>${c.name}</${Link}>${c.abstract ? html` <span class="badge">abstract</span>` : ''}</th>
            <td class="num">${count.data ? (own(count.data, c.name) ?? 0).toLocaleString() : count.loading ? '…' : ''}</td>
            <td class="muted">${c.fields.map((f) => f.name).join(', ')}</td>
          </tr>`)}</tbody>
        </table></${Scroll}>`)}
    </section>
    <section aria-labelledby="schema">
      <h2 id="schema">Schema</h2>
      ${sdl.loading && !sdl.data && html`<${Busy}>Reading the schema…</${Busy}>`}
      <${ErrorBox} error=${sdl.error} title="Could not read the schema" />
      ${sdl.data !== null && role && (can(role, 'admin')
        ? html`<${SchemaEditor} org=${org} db=${db} sdl=${sdl.data} onChanged=${changed} />`
        : html`<pre class="code" tabindex="0" aria-label="Schema (SDL)">${sdl.data || '(empty)'}</pre>
          <p class="hint">Only admins of the database change its schema.</p>`)}
    </section>
    ${can(role, 'admin') && html`<${Roles} who=${who} org=${org} db=${db} />`}`;
}

function SchemaEditor({ org, db, sdl, onChanged }) {
  const [text, setText] = useState(sdl);
  const [preview, setPreview] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState('');
  const [notice, setNotice] = useState('');
  const path = dbPath('/api/schema', org, db);

  const doPreview = async (e) => {
    e.preventDefault();
    setBusy('preview');
    setError(null);
    setNotice('');
    setPreview(null);
    try {
      const r = await request('PUT', `${path}?dry_run=true`, { body: text, headers: { 'Content-Type': 'application/graphql' } });
      setPreview({ ...r.data, sdl: text });
    } catch (err) {
      setError(err);
    }
    setBusy('');
  };
  const apply = async () => {
    setBusy('apply');
    setError(null);
    try {
      // If-Match: the version the preview was of, so that Apply makes
      // the change previewed and confirmed, not the same SDL against a
      // schema another admin changed since (force would drop what they
      // added, which the preview never showed).
      const r = await request('PUT', `${path}${preview.force_needed ? '?force=true' : ''}`, {
        body: preview.sdl, headers: { 'Content-Type': 'application/graphql', 'If-Match': `"${preview.schema_version}"` },
      });
      setPreview(null);
      setNotice(`Schema changed (version ${r.data.schema_version}): ${r.data.changes.length ? r.data.changes.join('; ') : 'no change'}.`);
      onChanged();
    } catch (err) {
      if (err instanceof ApiError && err.status === 412) {
        setPreview({ ...preview, outdated: true });
        setError(new ApiError(412, err.type, `the schema changed since the preview: preview again. ${err.message}`));
      } else {
        setError(err);
      }
    }
    setBusy('');
  };
  const stale = preview && preview.sdl !== text;
  return html`<form onSubmit=${doPreview} aria-busy=${!!busy}>
      <p><label for="sdl">Schema (GraphQL SDL)</label>
        <textarea id="sdl" class="code" rows=${Math.min(24, Math.max(6, text.split('\n').length + 1))} value=${text}
          onInput=${(e) => setText(e.target.value)} spellcheck=${false} aria-describedby="sdl-hint"></textarea>
        <span id="sdl-hint" class="hint">Preview shows what the change does before anything changes: what it adds, what it would lose (and needs force), and which stored documents it affects.</span></p>
      <p><button type="submit" class="primary" disabled=${!!busy}>${busy === 'preview' ? 'Previewing…' : 'Preview the change'}</button></p>
    </form>
    <${ErrorBox} error=${error} title=${busy === 'apply' || preview ? 'Could not change the schema' : 'The schema is not valid'} />
    <${Notice}>${notice}</${Notice}>
    ${preview && html`<div class="preview" aria-labelledby="preview-title">
      <h3 id="preview-title">What this change does</h3>
      ${stale && html`<p class="warning">You edited the schema after this preview: preview again before applying.</p>`}
      ${preview.outdated && html`<p class="warning">The schema changed since this preview (another change was made meanwhile): preview again before applying.</p>`}
      ${preview.changes.length === 0 ? html`<p>Nothing: the schema is the same.</p>` : html`<ul class="changes">
        ${preview.changes.map((c) => html`<li class=${c.destructive ? 'destructive' : 'additive'}>
          <span class="badge">${c.destructive ? 'loses data: needs force' : 'applies in place'}</span> ${c.change}
          ${c.documents > 0 && html`<div class="muted">${c.documents.toLocaleString()} stored document${c.documents === 1 ? '' : 's'}: ${c.ids.join(', ')}${c.documents > c.ids.length ? ', …' : ''}</div>`}
        </li>`)}
      </ul>`}
      ${preview.refused.length > 0 && html`<div class="error" role="alert"><p><strong>This change would be refused, even with force:</strong></p>
        <ul>${preview.refused.map((r) => html`<li>${r}</li>`)}</ul><p>Change those documents first, then preview again.</p></div>`}
      ${preview.refused.length === 0 && preview.changes.length > 0 && html`<p>
        ${preview.force_needed && html`<span class="warning">Applying it loses the data listed above; it cannot be undone. </span>`}
        <button type="button" class=${preview.force_needed ? 'danger' : 'primary'} disabled=${!!busy || stale || preview.outdated} onClick=${apply}>
          ${busy === 'apply' ? 'Applying…' : preview.force_needed ? 'Apply, losing that data (force)' : 'Apply the change'}</button></p>`}
    </div>`}`;
}
