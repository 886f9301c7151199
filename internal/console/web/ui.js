// The pieces every view shares: the html tag, navigation, errors,
// progress, confirmation dialogs and how values are shown.
import { h } from './preact.js';
import { useEffect, useLayoutEffect, useRef, useState } from './preact-hooks.js';
import htm from './htm.js';
import { ApiError, GraphQLError } from './api.js';

export const html = htm.bind(h);

// The console's root: every view's URL is below it.
export const root = '/console';

const navListeners = new Set();

// navigate shows the view of path (below root) and records it in the
// browser's history (replace: instead of adding to it).
export function navigate(path, { replace = false } = {}) {
  if (path === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  for (const fn of navListeners) fn();
}

// onNavigate calls fn after every navigation, the browser's back and
// forward included; it returns a function that stops that.
export function onNavigate(fn) {
  navListeners.add(fn);
  window.addEventListener('popstate', fn);
  return () => {
    navListeners.delete(fn);
    window.removeEventListener('popstate', fn);
  };
}

// Link is an <a> to a view of the console, followed without a reload
// (a modified click, to open a new tab, is left to the browser).
export function Link({ href, children, ...rest }) {
  const click = (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${click} ...${rest}>${children}</a>`;
}

// dbHref returns the URL of a view of database org/db.
export const dbHref = (org, db, view = '') =>
  `${root}/${encodeURIComponent(org)}/${encodeURIComponent(db)}${view ? `/${view}` : ''}`;

// query returns the current URL's query parameters.
export const query = () => new URLSearchParams(location.search);

// withQuery returns the current path with its query parameters changed
// (a null or empty value removes one).
export function withQuery(changes) {
  const q = query();
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === '') q.delete(k);
    else q.set(k, String(v));
  }
  const s = q.toString();
  return location.pathname + (s ? `?${s}` : '');
}

// describe returns what went wrong and what to do about it, for people.
function describe(err) {
  if (err instanceof GraphQLError) {
    const advice = {
      FORBIDDEN: 'Your role on this database does not allow this.',
      UNAUTHENTICATED: 'Sign in again.',
      NOT_FOUND: 'It may have been deleted.',
      BAD_USER_INPUT: 'Correct what the message names, then retry.',
      UNAVAILABLE: 'Sluice or its Postgres is unavailable for now: retry in a moment.',
    }[err.code] || '';
    return { message: err.message, advice };
  }
  if (err instanceof ApiError) return { message: err.message, advice: err.advice };
  return { message: String(err?.message || err), advice: 'Reload the page; if it happens again, report it.' };
}

// ErrorBox shows an error: what went wrong and what to do. It is an
// alert, so screen readers read it when it appears.
export function ErrorBox({ error, title = 'Something went wrong', children }) {
  if (!error) return null;
  const { message, advice } = describe(error);
  return html`<div class="error" role="alert">
    <p><strong>${title}:</strong> ${message}</p>
    ${advice && html`<p>${advice}</p>`}
    ${children}
  </div>`;
}

// Busy shows that work is under way.
export function Busy({ children = 'Loading…' }) {
  return html`<p class="busy" role="status"><span class="spinner" aria-hidden="true"></span>${children}</p>`;
}

// Notice is a polite status message (a write that succeeded).
export function Notice({ children }) {
  if (!children) return null;
  return html`<p class="notice" role="status">${children}</p>`;
}

// useLoad runs load (an async function of an AbortSignal) when deps
// change, and returns { data, error, loading, reload }. A newer run
// aborts the one before.
export function useLoad(load, deps) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const ctl = new AbortController();
    setState((s) => ({ data: s.data, error: null, loading: true }));
    load(ctl.signal).then(
      (data) => !ctl.signal.aborted && setState({ data, error: null, loading: false }),
      (error) => !ctl.signal.aborted && error?.name !== 'AbortError' && setState({ data: null, error, loading: false }),
    );
    return () => ctl.abort();
  }, [...deps, tick]);
  return { ...state, reload: () => setTick((t) => t + 1) };
}

// Confirm is a modal dialog asking to confirm what cannot be undone.
// With expect, the user must type it (a database's name) first.
export function Confirm({ title, children, action = 'Delete', expect = '', onConfirm, onCancel, danger = true }) {
  const ref = useRef(null);
  const [typed, setTyped] = useState('');
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.open && d.close();
  }, []);
  const ok = !expect || typed === expect;
  return html`<dialog ref=${ref} class="confirm" aria-labelledby="confirm-title" onCancel=${(e) => { e.preventDefault(); onCancel(); }}>
    <form method="dialog" onSubmit=${(e) => { e.preventDefault(); if (ok) onConfirm(); }}>
      <h2 id="confirm-title">${title}</h2>
      ${children}
      ${expect && html`<p><label>Type <strong>${expect}</strong> to confirm
        <input value=${typed} onInput=${(e) => setTyped(e.target.value)} autocomplete="off" spellcheck=${false} /></label></p>`}
      <div class="actions">
        <button type="submit" class=${danger ? 'danger' : 'primary'} disabled=${!ok}>${action}</button>
        <button type="button" onClick=${onCancel}>Cancel</button>
      </div>
    </form>
  </dialog>`;
}

// own returns obj's own property k, or undefined: never one found on
// Object.prototype. Keys the user names (a document's fields, a class, a
// user, a database) are read with it, since a field named constructor,
// toString or valueOf is otherwise found on every object, missing or not.
// Objects keyed by such names are made with dict (no prototype, so that
// even __proto__ is an ordinary key) or are Maps.
export const own = (obj, k) => (obj != null && Object.hasOwn(obj, k) ? obj[k] : undefined);

// dict returns an object without a prototype, for keys the user names.
export const dict = () => Object.create(null);

// show returns a value as text for a table cell: JSON for objects and
// lists, the id of a reference, and an empty string for a missing value.
export function show(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') {
    if (!Array.isArray(v) && Object.keys(v).length === 1 && typeof v._id === 'string') return v._id;
    if (Array.isArray(v) && v.every((x) => x && typeof x === 'object' && Object.keys(x).length === 1 && typeof x._id === 'string')) {
      return v.map((x) => x._id).join(', ');
    }
    return JSON.stringify(v);
  }
  return String(v);
}

// When shows a time for people, in their locale, with its ISO form as
// the title.
export function When({ at }) {
  if (!at) return html`<span>—</span>`;
  const d = new Date(typeof at === 'number' ? at * 1000 : at);
  if (Number.isNaN(d.getTime())) return html`<span>${String(at)}</span>`;
  return html`<time datetime=${d.toISOString()} title=${d.toISOString()}>${d.toLocaleString()}</time>`;
}

// useTitle sets the document's title for a view, as soon as the view is
// rendered.
export function useTitle(...parts) {
  useLayoutEffect(() => {
    document.title = [...parts.filter(Boolean), 'Sluice console'].join(' · ');
  }, parts);
}

// Scroll is a region that scrolls sideways on narrow screens (a wide
// table); it is focusable so that keyboard users can scroll it.
export function Scroll({ label, children }) {
  return html`<div class="scroll" role="region" aria-label=${label} tabindex="0">${children}</div>`;
}
