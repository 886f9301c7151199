// /console/{org}/{db}/history: the commits, newest first (?before= pages
// back); a commit opened (?commit=) shows each change with every field's
// old and new value; a document's history (?doc=) lists its versions;
// each links to the data as of that point.
import { useState } from './preact-hooks.js';
import { dbPath, request } from './api.js';
import { Busy, ErrorBox, Link, Scroll, When, dbHref, html, own, query, show, useLoad, useTitle, withQuery } from './ui.js';

const pageSize = 25;

export function History({ org, db }) {
  const q = query();
  const commit = q.get('commit') || '';
  const doc = q.get('doc') || '';
  const before = q.get('before') || '';
  useTitle(commit ? `Commit ${commit}` : doc ? `History of ${doc}` : 'History', `${org}/${db}`);
  if (commit) return html`<${Commit} key=${commit} org=${org} db=${db} id=${commit} />`;
  if (doc) return html`<${DocumentHistory} key=${doc + before} org=${org} db=${db} id=${doc} before=${before} />`;
  return html`<${Log} key=${before} org=${org} db=${db} before=${before} />`;
}

// nextCursor returns the named parameter of a Link header's rel="next".
function nextCursor(res, name) {
  const link = res.headers.get('Link') || '';
  const m = /<([^>]*)>\s*;\s*rel="next"/.exec(link);
  if (!m) return '';
  return new URL(m[1], location.origin).searchParams.get(name) || '';
}

function Log({ org, db, before }) {
  const log = useLoad(async (signal) => {
    const res = await request('GET', `${dbPath('/api/log', org, db)}?count=${pageSize}${before ? `&before=${encodeURIComponent(before)}` : ''}`, { signal });
    return { commits: res.data, next: nextCursor(res, 'before') };
  }, [org, db, before]);
  return html`<h1>History <span class="muted">of ${org}/${db}</span></h1>
    <p class="muted">Every commit, newest first: who made it, when, and why. Open one to see each document's old and new values.</p>
    ${log.loading && !log.data && html`<${Busy}>Reading the commits…</${Busy}>`}
    <${ErrorBox} error=${log.error} title="Could not read the history" />
    ${log.data && (log.data.commits.length === 0 ? html`<p>No commit yet.</p>` : html`<${Scroll} label="Commits"><table>
      <thead><tr><th scope="col">Commit</th><th scope="col">Time</th><th scope="col">Author</th><th scope="col">Message</th><th scope="col">User</th><th scope="col" class="num">Changes</th></tr></thead>
      <tbody>${log.data.commits.map((c) => html`<tr key=${c.id}>
        <th scope="row"><${Link} href=${withQuery({ commit: c.id, before: null })}>${c.id}</${Link}></th>
        <td><${When} at=${c.datetime} /></td><td>${c.author}</td><td>${c.message}</td><td>${c.user}</td><td class="num">${c.changes}</td>
      </tr>`)}</tbody></table></${Scroll}>`)}
    <p class="toolbar">
      ${before && html`<${Link} href=${withQuery({ before: null })}>Newest commits</${Link}>`}
      ${log.data?.next && html`<${Link} href=${withQuery({ before: log.data.next })}>Older commits</${Link}>`}
    </p>`;
}

// fieldsOf returns the fields of a change's images, in their order.
function fieldsOf(...docs) {
  const out = [];
  for (const d of docs) {
    for (const k of Object.keys(d || {})) if (!k.startsWith('@') && !out.includes(k)) out.push(k);
  }
  return out;
}

// Change shows one document's change: every field's old and new value.
function Change({ org, db, ch, asOf, links = true }) {
  const fields = fieldsOf(ch.before, ch.after);
  const cls = ch.type;
  return html`<li class="change">
    <h3><span class=${`op ${ch.op}`}>${ch.op}</span> ${ch.id}</h3>
    ${links && html`<p class="muted">
      <${Link} href=${`${dbHref(org, db, 'history')}?doc=${encodeURIComponent(ch.id)}`}>History of ${ch.id}</${Link}>
      ${ch.op !== 'deleted' && html` · <${Link} href=${`${dbHref(org, db, `documents/${encodeURIComponent(cls)}`)}?open=${encodeURIComponent(ch.id)}`}>Open it now</${Link}>`}
      ${asOf && html` · <${Link} href=${`${dbHref(org, db, `documents/${encodeURIComponent(cls)}`)}?asOf=${encodeURIComponent(asOf)}`}>${cls} as of this commit</${Link}>`}
    </p>`}
    <${Scroll} label=${`Fields of ${ch.id}`}><table class="diff">
      <thead><tr><th scope="col">Field</th><th scope="col">Old value</th><th scope="col">New value</th></tr></thead>
      <tbody>${fields.map((f) => {
        // A field's name is the user's: constructor, toString… are read
        // as the image's own fields, never Object.prototype's.
        const o = show(own(ch.before, f));
        const n = show(own(ch.after, f));
        return html`<tr class=${o !== n ? 'differs' : ''}>
          <th scope="row">${f}${o !== n ? html`<span class="sr-only"> (changed)</span>` : ''}</th>
          <td class="old">${ch.before ? o : html`<span class="muted">—</span>`}</td>
          <td class="new">${ch.after ? n : html`<span class="muted">—</span>`}</td>
        </tr>`;
      })}</tbody></table></${Scroll}>
  </li>`;
}

function Commit({ org, db, id }) {
  const [pages, setPages] = useState([]); // further pages of a large commit
  const [more, setMore] = useState({ loading: false, error: null });
  const first = useLoad(async (signal) => {
    // A commit id is a whole number; anything else in the URL would be
    // asked for as after=NaN, an error about a parameter the user never set.
    if (!/^[1-9][0-9]{0,14}$/.test(id)) throw new Error(`"${id}" is not a commit: a commit is a number, such as 12. Open one from the list of commits.`);
    const after = String(Number(id) - 1);
    const res = await request('GET', `${dbPath('/api/changes', org, db)}?after=${after}&limit=1`, { signal });
    const c = res.data.commits[0];
    if (!c || c.id !== id) throw new Error(`Commit ${id} is not in the retained history of ${org}/${db}.`);
    return { commit: c, next: res.data.next, more: res.data.more };
  }, [org, db, id]);
  const c = first.data?.commit;
  const changes = c ? [...c.changes, ...pages.flatMap((p) => p.changes)] : [];
  const cursor = pages.length ? pages[pages.length - 1].next : first.data?.next;
  const complete = c && changes.length >= c.changes_count;
  const loadMore = async () => {
    setMore({ loading: true, error: null });
    try {
      const res = await request('GET', `${dbPath('/api/changes', org, db)}?after=${encodeURIComponent(cursor)}&limit=1`);
      const p = res.data.commits[0];
      setPages([...pages, { changes: p && p.id === id ? p.changes : [], next: res.data.next }]);
      setMore({ loading: false, error: null });
    } catch (error) {
      setMore({ loading: false, error });
    }
  };
  return html`<h1>Commit ${id} <span class="muted">of ${org}/${db}</span></h1>
    <p><${Link} href=${dbHref(org, db, 'history')}>All commits</${Link}></p>
    ${first.loading && html`<${Busy}>Reading the commit…</${Busy}>`}
    <${ErrorBox} error=${first.error} title="Could not read the commit" />
    ${c && html`<dl class="meta">
      <dt>Time</dt><dd><${When} at=${c.datetime} /></dd>
      <dt>Author</dt><dd>${c.author || '—'}</dd>
      <dt>Message</dt><dd>${c.message || '—'}</dd>
      <dt>User</dt><dd>${c.user}</dd>
      <dt>Changes</dt><dd>${c.changes_count}</dd>
      <dt>Position</dt><dd><code>${c.position}</code></dd>
    </dl>
    <ol class="changelist">${changes.map((ch) => html`<${Change} key=${ch.position} org=${org} db=${db} ch=${ch} asOf=${c.position} />`)}</ol>
    ${!complete && html`<p>${changes.length} of ${c.changes_count} changes shown.
      <button type="button" onClick=${loadMore} disabled=${more.loading}>${more.loading ? 'Reading…' : 'Show more changes'}</button></p>`}
    <${ErrorBox} error=${more.error} title="Could not read more changes" />`}`;
}

function DocumentHistory({ org, db, id, before }) {
  const hist = useLoad(async (signal) => {
    const res = await request('GET', `${dbPath('/api/history', org, db)}?id=${encodeURIComponent(id)}&count=${pageSize}${before ? `&before=${encodeURIComponent(before)}` : ''}`, { signal });
    // The last page names, when retention pruned commits the document
    // existed at the end of, the end of the newest of them.
    return { versions: res.data, next: nextCursor(res, 'before'), pruned: res.headers.get('Sluice-History-Pruned') || '' };
  }, [org, db, id, before]);
  const cls = id.split('/')[0];
  const versions = hist.data?.versions || [];
  const pruned = hist.data?.pruned;
  return html`<h1>History of ${id} <span class="muted">in ${org}/${db}</span></h1>
    <p><${Link} href=${dbHref(org, db, 'history')}>All commits</${Link}> · <${Link} href=${`${dbHref(org, db, `documents/${encodeURIComponent(cls)}`)}?open=${encodeURIComponent(id)}`}>Open it now</${Link}></p>
    ${hist.loading && html`<${Busy}>Reading its versions…</${Busy}>`}
    <${ErrorBox} error=${hist.error} title="Could not read the document's history" />
    ${hist.data && (versions.length === 0 ? html`<p>No version of ${id} in this page of the retained history.</p>` : html`<ol class="changelist">${versions.map((v, i) => {
      const older = versions[i + 1];
      const ch = { type: cls, id, op: v.op, position: v.position, before: older ? older.document : null, after: v.document };
      return html`<li key=${v.position} class="version">
        <p><strong>Commit <${Link} href=${`${dbHref(org, db, 'history')}?commit=${encodeURIComponent(v.commit)}`}>${v.commit}</${Link}></strong>${' · '}<${When} at=${v.datetime} /> ${v.author && html` · <bdi>${v.author}</bdi>`} ${v.message && html` · “<bdi>${v.message}</bdi>”`} · ${v.user}
          ${v.document && html` · <${Link} href=${`${dbHref(org, db, `documents/${encodeURIComponent(cls)}`)}?asOf=${encodeURIComponent(v.position)}&open=${encodeURIComponent(id)}`}>As it was then</${Link}>`}</p>
        <ol class="changelist"><${Change} org=${org} db=${db} ch=${ch} links=${false} /></ol>
        ${!older && hist.data.next && html`<p class="muted">The version before is on the next page.</p>`}
        ${!older && pruned && html`<p class="muted">The version before was pruned: its old values are not known here.</p>`}
      </li>`;
    })}</ol>`)}
    ${pruned && html`<p class="notice">History before position <code>${pruned}</code> was pruned (log retention), and ${id} existed then${versions.length ? ': its oldest version listed is not its first' : ''}.${' '}
      <${Link} href=${`${dbHref(org, db, `documents/${encodeURIComponent(cls)}`)}?asOf=${encodeURIComponent(pruned)}&open=${encodeURIComponent(id)}`}>Read it as of that position</${Link}></p>`}
    ${hist.data?.next && html`<p><${Link} href=${withQuery({ before: hist.data.next })}>Older versions</${Link}></p>`}`;
}
