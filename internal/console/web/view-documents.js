// /console/{org}/{db}/documents/{Class}: a class's documents in a table,
// a page at a time, ordered and filtered by the API; a document opened,
// edited with its version (a change made meanwhile is a conflict, never a
// lost update), inserted or deleted. The URL holds the view's state
// (offset, limit, order, filter, the document open), so each state can be
// reloaded and shared.
import { useEffect, useRef, useState } from './preact-hooks.js';
import { ApiError, dbPath, graphql, request } from './api.js';
import { Busy, Confirm, ErrorBox, Link, Notice, Scroll, dbHref, dict, html, navigate, own, query, show, useLoad, useTitle, withQuery } from './ui.js';
import { can, loadDatabase } from './database.js';
import { countFields, loadModel, selection } from './model.js';

const pageSizes = [10, 25, 50, 100];
const scalarOps = ['eq', 'ne', 'lt', 'le', 'gt', 'ge', 'startsWith', 'regex'];
const opLabels = { eq: '=', ne: '≠', lt: '<', le: '≤', gt: '>', ge: '≥', startsWith: 'starts with', regex: 'matches (regex)' };

export function Documents({ org, db, cls }) {
  const q = query();
  const offset = Math.max(0, parseInt(q.get('offset') || '0', 10) || 0);
  const limit = pageSizes.includes(+q.get('limit')) ? +q.get('limit') : 25;
  const filterText = q.get('filter') || '';
  const asOf = q.get('asOf') || '';
  const open = q.get('open') || '';
  const creating = q.get('new') === '1';
  useTitle(open ? `${open}` : creating ? `New ${cls}` : cls, `${org}/${db}`);

  const info = useLoad(() => loadDatabase(org, db), [org, db]);
  const model = useLoad(() => loadModel(org, db), [org, db]);
  const c = model.data?.byName.get(cls);
  const order = orderOf(c, q.get('order') || '');
  const role = info.data?.role;
  const writable = can(role, 'write') && !asOf;

  let filter = null;
  let filterError = null;
  if (filterText) {
    try {
      filter = JSON.parse(filterText);
    } catch (e) {
      filterError = new Error(`The filter is not JSON: ${e.message}`);
    }
  }
  // The page's answer says which query it answers: until the answer to
  // the URL's query arrives, the counts say it is loading.
  const key = JSON.stringify([cls, limit, offset, order, filterText, asOf]);
  const page = useLoad(async (signal) => {
    if (!c || filterError) return null;
    let sel = selection(model.data, c.fields);
    if (countFields(sel) > 900) sel = selection(model.data, c.fields.filter((f) => !f.subdoc), 0);
    const [field, dir] = order.split(':');
    const args = ['filter: $f', 'limit: $l', 'offset: $o'];
    const vars = { f: filter, l: limit, o: offset };
    let decl = '$f: ' + cls + '_Filter, $l: Int, $o: Int';
    if (asOf) {
      args.push('asOf: $at');
      decl += ', $at: String';
      vars.at = asOf;
    }
    const orderArg = field ? `, orderBy: {${field}: ${dir === 'desc' ? 'DESC' : 'ASC'}}` : '';
    const text = `query(${decl}) { rows: ${cls}(${args.join(', ')}${orderArg}) { _id _type ${sel} } total: ${cls}_aggregate(filter: $f${asOf ? ', asOf: $at' : ''}) { count } }`;
    const { data, extensions } = await graphql(org, db, text, vars, { signal });
    return { rows: data.rows, total: data.total.count, position: extensions.position, offset, limit, key };
  }, [c, limit, offset, order, filterText, asOf]);

  if (model.error || info.error) return html`<h1>${cls}</h1><${ErrorBox} error=${model.error || info.error} title="Could not open the class" />`;
  if (!model.data || !info.data) return html`<h1>${cls}</h1><${Busy}>Reading the class…</${Busy}>`;
  if (!c) {
    return html`<h1>${cls}</h1><div class="error" role="alert"><p>${org}/${db} has no class ${cls} that you can read.</p>
      <p><${Link} href=${dbHref(org, db)}>See its classes.</${Link}></p></div>`;
  }
  const go = (changes) => navigate(withQuery(changes));
  const sortBy = (f) => {
    const [cur, dir] = order.split(':');
    go({ order: cur === f && dir !== 'desc' ? `${f}:desc` : `${f}:asc`, offset: null });
  };
  const current = page.data && page.data.key === key && !page.loading;
  const total = current ? page.data.total : null;
  const columns = c.fields;
  // A parent's documents include its subclasses': say each one's class.
  const mixed = c.interface || (page.data?.rows || []).some((r) => r._type !== cls);
  return html`<h1>${cls} <span class="muted">in ${org}/${db}</span></h1>
    ${asOf && html`<p class="warning" role="status">Showing the documents as they were at position <code>${asOf}</code>, read-only. <${Link} href=${withQuery({ asOf: null, open: null })}>Show them now</${Link}>.</p>`}
    ${c.fields.length === 0 && html`<p class="muted">You can read no field of ${cls} but its id.</p>`}
    <${FilterBar} c=${c} filterText=${filterText} onApply=${(f) => go({ filter: f, offset: null })} />
    <${ErrorBox} error=${filterError || page.error} title="Could not read the documents" />
    <div class="toolbar">
      <span role="status" aria-live="polite">${!current ? (page.error ? '' : 'Loading…') : total === 0 ? 'No documents' : `Documents ${(offset + 1).toLocaleString()}–${Math.min(offset + limit, total).toLocaleString()} of ${total.toLocaleString()}`}</span>
      <label>Per page <select value=${limit} onChange=${(e) => go({ limit: e.target.value, offset: null })}>${pageSizes.map((n) => html`<option value=${n}>${n}</option>`)}</select></label>
      <button type="button" disabled=${offset === 0 || !current} onClick=${() => go({ offset: Math.max(0, offset - limit) || null })}>Previous page</button>
      <button type="button" disabled=${!current || offset + limit >= total} onClick=${() => go({ offset: offset + limit })}>Next page</button>
      ${writable && (c.insertable || c.subclasses.length > 0) && html`<button type="button" class="primary" onClick=${() => go({ new: '1', open: null })}>New ${cls}</button>`}
    </div>
    ${open && html`<${DocumentPanel} key=${open} org=${org} db=${db} model=${model.data} id=${open} writable=${writable} asOf=${asOf}
        onClose=${() => go({ open: null })} onChanged=${page.reload} />`}
    ${creating && writable && html`<${NewDocument} org=${org} db=${db} model=${model.data} c=${c}
        onClose=${() => go({ new: null })} onCreated=${(id) => { page.reload(); go({ new: null, open: id }); }} />`}
    ${page.data && page.data.rows.length > 0 && html`<${Scroll} label=${`Documents of ${cls}`}><table class="documents" aria-busy=${page.loading}>
      <thead><tr>
        <th scope="col" aria-sort=${sortState(order, '_id')}><button type="button" class="sort" onClick=${() => sortBy('_id')}>Id${arrow(order, '_id')}</button></th>
        ${mixed && html`<th scope="col">Class</th>`}
        ${columns.map((f) => html`<th scope="col" aria-sort=${sortState(order, f.name)}>${f.orderable
          ? html`<button type="button" class="sort" onClick=${() => sortBy(f.name)}>${f.name}${arrow(order, f.name)}</button>`
          : f.name}</th>`)}
      </tr></thead>
      <tbody>${page.data.rows.map((row) => html`<tr key=${row._id} class=${row._id === open ? 'selected' : ''}>
        <th scope="row"><${Link} href=${withQuery({ open: row._id, new: null })}>${row._id}</${Link}></th>
        ${mixed && html`<td>${row._type}</td>`}
        ${columns.map((f) => html`<td class=${f.named === 'Int' || f.named === 'Float' ? 'num' : ''}>${trim(show(own(row, f.name)))}</td>`)}
      </tr>`)}</tbody>
    </table></${Scroll}>`}
    ${page.loading && !page.data && html`<${Busy}>Reading the documents…</${Busy}>`}
`;
}

const trim = (s) => (s.length > 120 ? `${s.slice(0, 119)}…` : s);

// orderOf returns order (the URL's, field:asc or field:desc) when its
// field is _id or one the class can be ordered by, as the model knows
// them, and '' (the default order) otherwise: the field is written into
// the query's text, so a URL must not put anything else there.
function orderOf(c, order) {
  const [field] = order.split(':');
  return field === '_id' || c?.fields.some((f) => f.orderable && f.name === field) ? order : '';
}

function sortState(order, f) {
  const [cur, dir] = order.split(':');
  if (cur !== f && !(f === '_id' && !order)) return undefined;
  return dir === 'desc' ? 'descending' : 'ascending';
}

function arrow(order, f) {
  const s = sortState(order, f);
  return s ? html`<span aria-hidden="true">${s === 'descending' ? ' ▼' : ' ▲'}</span>` : '';
}

// FilterBar builds a filter of one condition, or takes any filter as JSON.
function FilterBar({ c, filterText, onApply }) {
  const fields = c.fields.filter((f) => f.filterOps.some((o) => scalarOps.includes(o)));
  const [field, setField] = useState(fields[0]?.name || '');
  const f = fields.find((x) => x.name === field);
  const ops = (f?.filterOps || []).filter((o) => scalarOps.includes(o));
  const [op, setOp] = useState('eq');
  const [value, setValue] = useState('');
  const [json, setJSON] = useState(filterText);
  useEffect(() => setJSON(filterText), [filterText]);
  const build = (e) => {
    e.preventDefault();
    const o = ops.includes(op) ? op : ops[0];
    let v = value;
    // A number past a double's range (1e400) stays text, which Sluice
    // refuses: as Infinity, JSON.stringify would send null, no condition.
    if (f.named === 'Int' || f.named === 'Float') v = value.trim() !== '' && Number.isFinite(Number(value)) ? Number(value) : value;
    if (f.named === 'Boolean') v = value === 'true';
    const cond = { [f.name]: f.list ? { someHave: { [o]: v } } : { [o]: v } };
    onApply(JSON.stringify(cond));
  };
  return html`<details class="filter" open=${!!filterText}>
    <summary>Filter${filterText ? html`: <code>${filterText}</code>` : ''}</summary>
    ${fields.length > 0 && html`<form class="row" onSubmit=${build} aria-label="Filter by a field">
      <p><label for="filter-field">Field</label><select id="filter-field" value=${field} onChange=${(e) => setField(e.target.value)}>
        ${fields.map((x) => html`<option value=${x.name}>${x.name}</option>`)}</select></p>
      <p><label for="filter-op">Condition</label><select id="filter-op" value=${ops.includes(op) ? op : ops[0]} onChange=${(e) => setOp(e.target.value)}>
        ${ops.map((o) => html`<option value=${o}>${opLabels[o]}</option>`)}</select></p>
      <p><label for="filter-value">Value</label>${f?.enumValues
        ? html`<select id="filter-value" value=${value} onChange=${(e) => setValue(e.target.value)}><option value="">—</option>${f.enumValues.map((v) => html`<option>${v}</option>`)}</select>`
        : f?.named === 'Boolean' ? html`<select id="filter-value" value=${value} onChange=${(e) => setValue(e.target.value)}><option value="true">true</option><option value="false">false</option></select>`
        : html`<input id="filter-value" value=${value} onInput=${(e) => setValue(e.target.value)} spellcheck=${false} />`}</p>
      <p><button type="submit" class="primary">Filter</button></p>
    </form>`}
    <form class="row" onSubmit=${(e) => { e.preventDefault(); onApply(json.trim()); }} aria-label="Filter as JSON">
      <p class="grow"><label for="filter-json">Any filter, as JSON (<code>${c.name}_Filter</code>: <code>_and</code>, <code>_or</code>, <code>_not</code>, nested references…)</label>
        <input id="filter-json" class="code" value=${json} onInput=${(e) => setJSON(e.target.value)} spellcheck=${false} placeholder='{"age": {"ge": 30}}' /></p>
      <p><button type="submit">Apply</button> ${filterText && html`<button type="button" onClick=${() => onApply('')}>Clear the filter</button>`}</p>
    </form>
  </details>`;
}

// ---- One document -------------------------------------------------------

const complex = (f) => f.list || f.subdoc || f.named === 'JSON';

// toForm returns a document's fields as the text the form edits. Field
// names are the user's (constructor, toString…): they are read as own
// properties only, into an object without a prototype.
function toForm(c, doc) {
  const out = dict();
  for (const f of c.fields) {
    const v = own(doc, f.name);
    if (v === undefined || v === null) out[f.name] = '';
    else if (complex(f)) out[f.name] = JSON.stringify(v, null, 2);
    else if (typeof v === 'object' && typeof v['@id'] === 'string') out[f.name] = v['@id'];
    else out[f.name] = String(v);
  }
  return out;
}

// fromForm returns the document the form describes, or { errors } naming
// fields whose text is not JSON. Values are sent as typed where they read
// as that type, else as text: Sluice's validation then names the field.
function fromForm(c, type, id, values) {
  const doc = dict();
  doc['@type'] = type;
  if (id) doc['@id'] = id;
  const errors = dict();
  for (const f of c.fields) {
    const t = own(values, f.name) ?? '';
    if (t.trim() === '') continue;
    if (complex(f)) {
      try {
        doc[f.name] = JSON.parse(t);
      } catch (e) {
        errors[f.name] = `not valid JSON: ${e.message}`;
      }
    } else if (f.named === 'Int' || f.named === 'Float') {
      // A number past a double's range (1e400) stays text: as Infinity,
      // JSON.stringify would send null, which removes the field.
      const n = Number(t);
      doc[f.name] = /^\s*-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(t) && Number.isFinite(n) ? n : t;
    } else if (f.named === 'Boolean') {
      doc[f.name] = t === 'true' ? true : t === 'false' ? false : t;
    } else doc[f.name] = t;
  }
  return Object.keys(errors).length ? { errors } : { doc };
}

// withoutMeta returns a document without its @id, @type and @version.
function withoutMeta(doc) {
  return Object.fromEntries(Object.entries(doc || {}).filter(([k]) => !k.startsWith('@')));
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// mergePatch returns the JSON Merge Patch (RFC 7396) that turns before
// into after: keys whose values differ, objects patched key by key, null
// for keys removed; at the top level only the given fields count.
function mergePatch(before, after, fields) {
  const patch = dict();
  for (const k of fields || new Set([...Object.keys(before), ...Object.keys(after)])) {
    const b = own(before, k);
    const a = own(after, k);
    if (a === undefined) {
      if (b !== undefined && b !== null) patch[k] = null;
    } else if (isObject(a) && isObject(b)) {
      const sub = mergePatch(b, a);
      if (Object.keys(sub).length) patch[k] = sub;
    } else if (JSON.stringify(a) !== JSON.stringify(b)) patch[k] = a;
  }
  return patch;
}

// nullMember reports whether v is an object holding a null member, at
// any depth of objects: a merge patch cannot write one. (A list is
// replaced whole, its items as given.)
function nullMember(v) {
  return isObject(v) && Object.values(v).some((x) => x === null || nullMember(x));
}

// unsafeInteger reports whether v holds, at any depth, a whole number
// past 2^53, which JSON.parse has rounded.
function unsafeInteger(v) {
  if (typeof v === 'number') return Number.isInteger(v) && !Number.isSafeInteger(v);
  return v !== null && typeof v === 'object' && Object.values(v).some(unsafeInteger);
}

// replaced returns the document base (as read, @id and @type kept) with
// the given fields as in edited: each replaced whole, or removed when
// edited has no value for it.
function replaced(base, edited, fields) {
  const doc = dict();
  for (const [k, v] of Object.entries(base)) if (k !== '@version') doc[k] = v;
  for (const k of fields) {
    const v = own(edited, k);
    if (v === undefined) delete doc[k];
    else doc[k] = v;
  }
  return doc;
}

// fieldOf returns the field a validation error names, if it names one.
function fieldOf(message) {
  const m = /(?:field|unknown field) "([^".[\]]+)/.exec(message || '');
  return m ? m[1] : '';
}

// etagOf returns a read's ETag as an If-Match value. It is not shown:
// to a role that cannot read every field, it names the view too
// ("4-read-1"); the version shown is the document's @version.
function etagOf(res) {
  const etag = res.headers.get('ETag');
  if (etag) return etag;
  const v = res.data?.['@version'];
  return v ? `"${v}"` : '';
}

// Field is one field of a document's form. Both forms of a document are
// autocomplete="off": a browser saves the values of a form's fields with
// the tab's history (Chromium at each input, into the session it writes
// to disk) unless its form says off, and these are a document's values,
// @private ones included when the user's role reads them.
function Field({ f, value, onInput, error, readOnly }) {
  const id = `field-${f.name}`;
  const label = html`<label for=${id}>${f.name}${f.required ? html`<span aria-hidden="true"> *</span>` : ''} <span class="type">${f.list ? `[${f.named}]` : f.named}${f.required ? '!' : ''}</span></label>`;
  const common = { id, readOnly, 'aria-invalid': error ? 'true' : undefined, 'aria-describedby': error ? `${id}-error` : undefined, 'aria-required': f.required ? 'true' : undefined };
  let input;
  if (complex(f)) {
    input = html`<textarea class="code" rows=${Math.min(8, Math.max(2, value.split('\n').length))} value=${value} onInput=${(e) => onInput(e.target.value)} spellcheck=${false} ...${common}></textarea>`;
  } else if (f.enumValues && !readOnly) {
    input = html`<select value=${value} onChange=${(e) => onInput(e.target.value)} ...${common}><option value="">(none)</option>${f.enumValues.map((v) => html`<option>${v}</option>`)}</select>`;
  } else if (f.named === 'Boolean' && !readOnly) {
    input = html`<select value=${value} onChange=${(e) => onInput(e.target.value)} ...${common}><option value="">(none)</option><option>true</option><option>false</option></select>`;
  } else {
    const numeric = f.named === 'Int' || f.named === 'Float';
    input = html`<input value=${value} onInput=${(e) => onInput(e.target.value)} inputmode=${numeric ? 'decimal' : undefined} spellcheck=${false}
      placeholder=${f.ref ? `${f.named}/…` : f.named === 'DateTime' ? '2026-01-31T12:00:00Z' : ''} ...${common} />`;
  }
  return html`<div class=${`field${error ? ' invalid' : ''}`}>${label}${input}
    ${error && html`<span id=${`${id}-error`} class="field-error">${error}</span>`}</div>`;
}

function DocumentPanel({ org, db, model, id, writable, asOf, onClose, onChanged }) {
  const path = dbPath('/api/document', org, db);
  const [values, setValues] = useState(null);
  const [state, setState] = useState({ loading: true, error: null, doc: null, etag: '' });
  const [fieldErrors, setFieldErrors] = useState(dict);
  const [error, setError] = useState(null);
  const [conflict, setConflict] = useState(null); // { version, theirs }
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState('');
  const [deleting, setDeleting] = useState(false);
  const heading = useRef(null);

  const load = async () => {
    setState((s) => ({ ...s, loading: true, error: null }));
    try {
      const res = await request('GET', `${path}?id=${encodeURIComponent(id)}${asOf ? `&as_of=${encodeURIComponent(asOf)}` : ''}`);
      const c = model.byName.get(res.data['@type']);
      setState({ loading: false, error: null, doc: res.data, etag: etagOf(res), c });
      setValues(c ? toForm(c, res.data) : {});
      setFieldErrors(dict());
      setConflict(null);
      return res;
    } catch (err) {
      setState({ loading: false, error: err, doc: null, etag: '' });
      return null;
    }
  };
  useEffect(() => {
    load().then(() => heading.current?.focus());
  }, [id]);

  const { doc, c, etag } = state;
  const dirty = c && values && JSON.stringify(values) !== JSON.stringify(toForm(c, doc));

  // save writes the fields edited at version ifMatch; base is the
  // document as the user last saw it stored (theirs, when saving over a
  // conflict).
  const save = async (ifMatch, base = doc) => {
    const built = fromForm(c, doc['@type'], doc['@id'], values);
    setFieldErrors(built.errors || dict());
    setError(null);
    setNotice('');
    if (built.errors) return;
    setBusy('save');
    try {
      // A merge patch of the fields edited, not the whole document: the
      // fields the user's role cannot read (absent from the form) are
      // kept, and so are the fields someone else changed that the user
      // did not touch. If-Match makes it a write of the version read.
      const patch = mergePatch(withoutMeta(doc), withoutMeta(built.doc), c.fields.map((f) => f.name));
      const headers = ifMatch ? { 'If-Match': ifMatch } : {};
      // A merge patch removes an object's null members (RFC 7396), so an
      // edited value holding one (a JSON field's {"k": null}) is written
      // with the whole document instead: base with the edited fields as
      // typed. The fields the role cannot read are kept by the PUT too.
      const whole = Object.keys(patch).some((k) => nullMember(own(built.doc, k))) ? replaced(base, built.doc, Object.keys(patch)) : null;
      // The browser read a whole number past 2^53 as the nearest it can
      // hold, so writing the document back would change it.
      if (whole && unsafeInteger(whole)) {
        throw new Error('A value you changed holds a null member, which only a write of the whole document can store, and the document holds a whole number past 2^53 that the browser cannot carry exactly, which that write would change. Nothing was written: set the value with GraphQL (the class\'s _update mutation, in GraphiQL), which stores null members.');
      }
      const res = whole
        ? await request('PUT', path, { body: JSON.stringify(whole), headers: { 'Content-Type': 'application/json', ...headers } })
        : await request('PATCH', `${path}?id=${encodeURIComponent(id)}`, {
          body: JSON.stringify(patch),
          headers: { 'Content-Type': 'application/merge-patch+json', ...headers },
        });
      const version = res.data?.version || res.headers.get('ETag') || '';
      await load();
      setNotice(`Saved${version ? ` (version ${version.replace(/"/g, '')})` : ''}.`);
      onChanged();
    } catch (err) {
      if (err instanceof ApiError && err.status === 412) {
        const theirs = await request('GET', `${path}?id=${encodeURIComponent(id)}`).catch(() => null);
        setConflict({ version: theirs ? etagOf(theirs) : err.headers?.get('ETag') || '', theirs: theirs?.data || null, gone: !theirs });
      } else {
        const name = err instanceof ApiError && err.status === 400 ? fieldOf(err.message) : '';
        if (name && c.fields.some((f) => f.name === name)) setFieldErrors({ [name]: err.message });
        else setError(err);
      }
    }
    setBusy('');
  };
  const remove = async () => {
    setDeleting(false);
    setBusy('delete');
    setError(null);
    try {
      await request('DELETE', `${path}?id=${encodeURIComponent(id)}`, { headers: etag ? { 'If-Match': etag } : {} });
      onChanged();
      onClose();
    } catch (err) {
      if (err instanceof ApiError && err.status === 412) {
        const theirs = await request('GET', `${path}?id=${encodeURIComponent(id)}`).catch(() => null);
        setConflict({ version: theirs ? etagOf(theirs) : '', theirs: theirs?.data || null, gone: !theirs, deleting: true });
      } else setError(err);
      setBusy('');
    }
  };

  return html`<section class="panel" aria-labelledby="doc-title">
    <div class="panel-head">
      <h2 id="doc-title" tabindex="-1" ref=${heading}>${id}</h2>
      <button type="button" onClick=${onClose}>Close<span class="sr-only"> the document</span></button>
    </div>
    ${state.loading && !doc && html`<${Busy}>Reading the document…</${Busy}>`}
    <${ErrorBox} error=${state.error} title="Could not read the document" />
    ${doc && html`<p class="muted">${doc['@type']}${doc['@version'] ? html` · version <code>${doc['@version']}</code>` : ''}
      · <${Link} href=${`${dbHref(org, db, 'history')}?doc=${encodeURIComponent(id)}`}>History of this document</${Link}></p>`}
    ${conflict && html`<div class="error conflict" role="alert">
      <p><strong>${conflict.gone ? 'Someone deleted this document since you opened it.' : `Someone changed this document since you opened it${conflict.version ? ` (it is now at version ${conflict.theirs?.['@version'] || conflict.version.replace(/"/g, '')})` : ''}.`}</strong>
        ${conflict.deleting ? ' It was not deleted.' : ' Your changes were not saved: nothing was written.'}</p>
      ${conflict.theirs && c && html`<${Scroll} label="The fields that differ"><table>
        <thead><tr><th scope="col">Field</th><th scope="col">When you opened it</th><th scope="col">Now (theirs)</th><th scope="col">Yours</th></tr></thead>
        <tbody>${c.fields.map((f) => {
          const read = own(toForm(c, doc), f.name);
          const theirs = own(toForm(c, conflict.theirs), f.name);
          const mine = own(values, f.name);
          if (read === theirs && read === mine) return null;
          return html`<tr class="differs"><th scope="row">${f.name}</th><td>${read}</td><td>${theirs}</td><td>${mine}</td></tr>`;
        })}</tbody></table></${Scroll}>`}
      <p class="actions">
        <button type="button" onClick=${load}>Discard mine, show theirs</button>
        ${!conflict.gone && !conflict.deleting && html`<button type="button" class="danger" onClick=${() => save(conflict.version, conflict.theirs || doc)}>Save my changes over theirs</button>`}
      </p>
      ${!conflict.gone && !conflict.deleting && html`<p class="hint">Saving writes only the fields you changed; their other changes stay.</p>`}
    </div>`}
    ${doc && c && values && html`<form class="document" autocomplete="off" onSubmit=${(e) => { e.preventDefault(); save(etag); }} aria-busy=${!!busy}>
      ${c.fields.map((f) => html`<${Field} key=${f.name} f=${f} value=${own(values, f.name) ?? ''} readOnly=${!writable}
        error=${own(fieldErrors, f.name)} onInput=${(v) => setValues({ ...values, [f.name]: v })} />`)}
      <${ErrorBox} error=${error} title="Could not save the document" />
      <${Notice}>${notice}</${Notice}>
      ${writable && html`<p class="actions">
        <button type="submit" class="primary" disabled=${!!busy || !dirty}>${busy === 'save' ? 'Saving…' : 'Save'}</button>
        <button type="button" disabled=${!!busy || !dirty} onClick=${() => { setValues(toForm(c, doc)); setFieldErrors(dict()); }}>Undo my edits</button>
        <button type="button" class="danger" disabled=${!!busy} onClick=${() => setDeleting(true)}>Delete</button>
      </p>`}
    </form>`}
    ${doc && !c && html`<pre class="code" tabindex="0" aria-label="The document">${JSON.stringify(doc, null, 2)}</pre>`}
    ${deleting && html`<${Confirm} title=${`Delete ${id}?`} action="Delete the document" onConfirm=${remove} onCancel=${() => setDeleting(false)}>
      <p>The deletion is a commit: the document stays in the history, but no longer in ${org}/${db}.</p></${Confirm}>`}
  </section>`;
}

function NewDocument({ org, db, model, c, onClose, onCreated }) {
  const types = [c.name, ...c.subclasses].filter((n, i, all) => all.indexOf(n) === i && model.byName.get(n)?.insertable);
  const [type, setType] = useState(types[0] || '');
  const tc = model.byName.get(type) || c;
  const [key, setKey] = useState('');
  const [values, setValues] = useState(dict);
  const [fieldErrors, setFieldErrors] = useState(dict);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const heading = useRef(null);
  useEffect(() => heading.current?.focus(), []);
  const submit = async (e) => {
    e.preventDefault();
    const built = fromForm(tc, type, key.trim(), values);
    setFieldErrors(built.errors || dict());
    setError(null);
    if (built.errors) return;
    setBusy(true);
    try {
      const res = await request('POST', dbPath('/api/document', org, db), { body: built.doc });
      onCreated(res.data.ids[0]);
    } catch (err) {
      const name = err instanceof ApiError && err.status === 400 ? fieldOf(err.message) : '';
      if (name && tc.fields.some((f) => f.name === name)) setFieldErrors({ [name]: err.message });
      else setError(err);
      setBusy(false);
    }
  };
  return html`<section class="panel" aria-labelledby="new-title">
    <div class="panel-head">
      <h2 id="new-title" tabindex="-1" ref=${heading}>New ${type || c.name}</h2>
      <button type="button" onClick=${onClose}>Cancel<span class="sr-only"> the new document</span></button>
    </div>
    <form class="document" autocomplete="off" onSubmit=${submit} aria-busy=${busy}>
      ${types.length > 1 && html`<div class="field"><label for="new-type">Class</label>
        <select id="new-type" value=${type} onChange=${(e) => setType(e.target.value)}>${types.map((t) => html`<option>${t}</option>`)}</select></div>`}
      <div class="field"><label for="new-key">Id <span class="type">optional: a key, or nothing for a random one</span></label>
        <input id="new-key" value=${key} onInput=${(e) => setKey(e.target.value)} spellcheck=${false} autocapitalize="none" placeholder=${`${type}/…`} /></div>
      ${tc.fields.map((f) => html`<${Field} key=${f.name} f=${f} value=${own(values, f.name) ?? ''} error=${own(fieldErrors, f.name)}
        onInput=${(v) => setValues({ ...values, [f.name]: v })} />`)}
      <${ErrorBox} error=${error} title="Could not insert the document" />
      <p class="actions"><button type="submit" class="primary" disabled=${busy || !type}>${busy ? 'Inserting…' : `Insert the ${type}`}</button></p>
    </form>
  </section>`;
}
