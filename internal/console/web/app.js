// The console: sign-in, the layout every view shares, and the router
// that maps each URL below /console/ to its view.
import { render } from './preact.js';
import { useEffect, useRef, useState } from './preact-hooks.js';
import { onSession, session, signIn, signOut, takeSignOutReason } from './api.js';
import { ErrorBox, Link, dbHref, html, navigate, onNavigate, root, useTitle } from './ui.js';
import { Databases } from './view-databases.js';
import { Database } from './view-database.js';
import { Documents } from './view-documents.js';
import { Stream } from './view-stream.js';
import { History } from './view-history.js';
import { Webhooks } from './view-webhooks.js';
import { Users } from './view-users.js';

// route returns the view that path names: { view, org, db, cls }.
function route(path) {
  const rest = path.startsWith(`${root}/`) ? path.slice(root.length + 1) : null;
  if (rest === null) return { view: 'notfound' };
  const parts = rest.split('/').filter((p, i, all) => p !== '' || i < all.length - 1);
  if (parts.length === 0 || (parts.length === 1 && parts[0] === '')) return { view: 'databases' };
  let dec;
  try {
    dec = parts.map(decodeURIComponent);
  } catch {
    return { view: 'notfound' };
  }
  if (dec.length === 1 && dec[0] === 'users') return { view: 'users' };
  if (dec.length < 2) return { view: 'notfound' };
  const [org, db, view, cls, ...more] = dec;
  if (more.length) return { view: 'notfound' };
  if (view === undefined) return { view: 'database', org, db };
  if (view === 'documents' && cls) return { view: 'documents', org, db, cls };
  if (['stream', 'history', 'webhooks'].includes(view) && cls === undefined) return { view, org, db };
  return { view: 'notfound' };
}

function SignIn() {
  const [kind, setKind] = useState('password');
  const [user, setUser] = useState('');
  const [secret, setSecret] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [reason] = useState(takeSignOutReason);
  useTitle('Sign in');
  const first = useRef(null);
  useEffect(() => first.current?.focus(), [kind]);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(kind, user, secret);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return html`<main id="main" class="signin" tabindex="-1">
    <h1>Sign in to Sluice</h1>
    ${reason && html`<p class="notice" role="status">${reason}</p>`}
    <form onSubmit=${submit} aria-busy=${busy}>
      <fieldset>
        <legend>Sign in with</legend>
        <label class="inline"><input type="radio" name="kind" checked=${kind === 'password'} onChange=${() => setKind('password')} /> a user name and password</label>
        <label class="inline"><input type="radio" name="kind" checked=${kind === 'token'} onChange=${() => setKind('token')} /> an API token or a JWT</label>
      </fieldset>
      ${kind === 'password' ? html`
        <p><label for="signin-user">User name</label>
          <input id="signin-user" ref=${first} value=${user} onInput=${(e) => setUser(e.target.value)} autocomplete="username" required autocapitalize="none" spellcheck=${false} /></p>
        <p><label for="signin-password">Password</label>
          <input id="signin-password" type="password" value=${secret} onInput=${(e) => setSecret(e.target.value)} autocomplete="current-password" required /></p>` : html`
        <p><label for="signin-token">API token or JWT</label>
          <textarea id="signin-token" ref=${first} rows="3" value=${secret} onInput=${(e) => setSecret(e.target.value)} required spellcheck=${false} autocomplete="off"></textarea></p>`}
      <${ErrorBox} error=${error} title="Could not sign in" />
      <p><button type="submit" class="primary" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button></p>
    </form>
    <p class="hint">The console keeps your credential in this page's memory only, until you sign out, reload, leave or close it (it is never stored), and sends it with each request to Sluice's API: it can do what you could do with curl, nothing more.</p>
  </main>`;
}

function Header({ who, r }) {
  const inDb = r.org !== undefined;
  const out = () => {
    signOut('You signed out.');
    navigate(`${root}/`);
  };
  return html`<header class="top">
    <a class="skip" href="#main">Skip to content</a>
    <nav aria-label="Console">
      <${Link} class="brand" href=${`${root}/`}>Sluice</${Link}>
      <${Link} href=${`${root}/`} aria-current=${r.view === 'databases' ? 'page' : undefined}>Databases</${Link}>
      ${who.superuser && html`<${Link} href=${`${root}/users`} aria-current=${r.view === 'users' ? 'page' : undefined}>Users</${Link}>`}
      ${!who.superuser && html`<${Link} href=${`${root}/users`} aria-current=${r.view === 'users' ? 'page' : undefined}>Your tokens</${Link}>`}
    </nav>
    <div class="who">
      <span>Signed in as <strong>${who.user}</strong>${who.superuser ? ' (super user)' : ''}</span>
      <button type="button" onClick=${out}>Sign out</button>
    </div>
    ${inDb && html`<${DatabaseNav} r=${r} />`}
  </header>`;
}

function DatabaseNav({ r }) {
  const tabs = [
    ['', 'Classes and schema'],
    ['stream', 'Stream'],
    ['history', 'History'],
    ['webhooks', 'Webhooks'],
  ];
  const current = r.view === 'database' ? '' : r.view;
  return html`<nav class="dbnav" aria-label=${`Database ${r.org}/${r.db}`}>
    <span class="dbname">${r.org}/${r.db}</span>
    ${tabs.map(([v, label]) => html`<${Link} href=${dbHref(r.org, r.db, v)} aria-current=${current === v ? 'page' : undefined}>${label}</${Link}>`)}
    <a href=${`/api/graphiql/${encodeURIComponent(r.org)}/${encodeURIComponent(r.db)}`} target="_blank" rel="noopener">GraphiQL<span class="sr-only"> (opens in a new tab)</span></a>
  </nav>`;
}

function NotFound() {
  useTitle('Not found');
  return html`<h1>Nothing here</h1>
    <p>The console has no view at this address. <${Link} href=${`${root}/`}>See your databases.</${Link}></p>`;
}

function App() {
  const [who, setWho] = useState(session);
  const [path, setPath] = useState(location.pathname);
  const [, setSearch] = useState(location.search);
  useEffect(() => onSession(setWho), []);
  useEffect(() => onNavigate(() => {
    setPath(location.pathname);
    setSearch(location.search);
  }), []);
  // After a navigation to another view, focus its main region, so that
  // keyboard and screen reader users start at the new content.
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    document.getElementById('main')?.focus();
  }, [path]);
  if (!who) return html`<${SignIn} />`;
  const r = route(path);
  let view;
  switch (r.view) {
    case 'databases': view = html`<${Databases} who=${who} />`; break;
    case 'users': view = html`<${Users} who=${who} />`; break;
    case 'database': view = html`<${Database} who=${who} org=${r.org} db=${r.db} />`; break;
    case 'documents': view = html`<${Documents} who=${who} org=${r.org} db=${r.db} cls=${r.cls} />`; break;
    case 'stream': view = html`<${Stream} who=${who} org=${r.org} db=${r.db} />`; break;
    case 'history': view = html`<${History} who=${who} org=${r.org} db=${r.db} />`; break;
    case 'webhooks': view = html`<${Webhooks} who=${who} org=${r.org} db=${r.db} />`; break;
    default: view = html`<${NotFound} />`;
  }
  return html`<${Header} who=${who} r=${r} />
    <main id="main" tabindex="-1" key=${path}>${view}</main>`;
}

// Leaving the page forgets the credential. A reload, a new tab or another
// window starts with nothing in memory, but Back (or Forward) to a page
// the browser kept in its back/forward cache would restore this one with
// the credential still in memory, signed in. So the console signs out as
// the page is hidden (pagehide: a navigation away, a reload, the tab
// closed), and again if a kept page is shown (pageshow, persisted), so
// that Back asks to sign in as a reload does.
const forget = () => {
  if (session()) signOut('You left the console, so it forgot your credential: sign in again.');
};
window.addEventListener('pagehide', forget);
window.addEventListener('pageshow', (e) => e.persisted && forget());

// The page's placeholder text goes: Preact adds to what the element holds.
const app = document.getElementById('app');
app.textContent = '';
render(html`<${App} />`, app);
