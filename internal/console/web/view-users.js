// /console/users: for the super user, the users and organizations, with
// their roles per database; for every user, their own API tokens and
// password. Only the super user may list users: anyone else is told so.
import { useState } from './preact-hooks.js';
import { dbPath, request, session, signIn } from './api.js';
import { Busy, Confirm, ErrorBox, Notice, Scroll, When, dict, html, own, useLoad, useTitle } from './ui.js';

export function Users({ who }) {
  useTitle(who.superuser ? 'Users' : 'Your tokens');
  return html`<h1>${who.superuser ? 'Users and roles' : 'Your account'}</h1>
    ${who.superuser ? html`<${UserList} who=${who} />` : html`<p class="notice" role="status">Only the super user lists and manages users, organizations and roles. An admin of a database grants roles on it from the database's page.</p>`}
    <${Tokens} who=${who} />
    <${Password} who=${who} />`;
}

function UserList({ who }) {
  const users = useLoad((signal) => request('GET', '/api/users', { signal }).then((r) => r.data), []);
  const orgs = useLoad((signal) => request('GET', '/api/organizations', { signal }).then((r) => r.data), []);
  // Roles per database: GET /api/roles on each database, turned into
  // each user's roles.
  const roles = useLoad(async (signal) => {
    const dbs = (await request('GET', '/api/db', { signal })).data;
    const byUser = dict(); // user names (constructor, toString…) are keys
    await Promise.all(dbs.map(async (d) => {
      const r = await request('GET', dbPath('/api/roles', d.organization, d.name), { signal });
      for (const g of r.data) (byUser[g.user] ||= []).push(`${d.path}: ${g.role}`);
    }));
    return byUser;
  }, []);
  const [deleting, setDeleting] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const remove = async (u) => {
    setDeleting(null);
    setError(null);
    try {
      await request('DELETE', `/api/users/${encodeURIComponent(u.name)}`);
      setNotice(`Deleted ${u.name}.`);
      users.reload();
    } catch (err) {
      setError(err);
    }
  };
  return html`<section aria-labelledby="users">
      <h2 id="users">Users</h2>
      ${users.loading && !users.data && html`<${Busy}>Reading the users…</${Busy}>`}
      <${ErrorBox} error=${users.error} title="Could not list the users" />
      <${ErrorBox} error=${error} title="Could not delete the user" />
      <${Notice}>${notice}</${Notice}>
      ${users.data && html`<${Scroll} label="Users"><table>
        <thead><tr><th scope="col">User</th><th scope="col">Organization</th><th scope="col">Roles</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>${users.data.map((u) => html`<tr key=${u.name}>
          <th scope="row">${u.name}</th><td>${u.organization}</td>
          <td>${u.superuser ? 'super user: every right' : roles.data ? (own(roles.data, u.name) || []).join(', ') || 'none' : roles.error ? 'unknown' : '…'}</td>
          <td>${!u.superuser && u.name !== who.user && html`<button type="button" class="danger small" onClick=${() => setDeleting(u)}>Delete<span class="sr-only"> ${u.name}</span></button>`}</td>
        </tr>`)}</tbody></table></${Scroll}>`}
      <${CreateUser} orgs=${orgs.data || []} onCreated=${(name) => { setNotice(`Created ${name}. Give it roles from each database's page.`); users.reload(); }} />
    </section>
    <${Organizations} orgs=${orgs} />
    ${deleting && html`<${Confirm} title=${`Delete ${deleting.name}?`} expect=${deleting.name} action="Delete the user" onConfirm=${() => remove(deleting)} onCancel=${() => setDeleting(null)}>
      <p>This deletes the user with its tokens and roles, and ends its open streams.</p></${Confirm}>`}`;
}

function CreateUser({ orgs, onCreated }) {
  const [name, setName] = useState('');
  const [org, setOrg] = useState('admin');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await request('POST', '/api/users', { body: { name, organization: org, password } });
      onCreated(name);
      setName('');
      setPassword('');
    } catch (err) {
      setError(err);
    }
    setBusy(false);
  };
  return html`<form onSubmit=${submit} class="row" aria-labelledby="new-user" aria-busy=${busy}>
    <h3 id="new-user" class="wide">Create a user</h3>
    <p><label for="user-name">User name</label><input id="user-name" value=${name} onInput=${(e) => setName(e.target.value)} required autocomplete="off" spellcheck=${false} autocapitalize="none" /></p>
    <p><label for="user-org">Organization</label><select id="user-org" value=${org} onChange=${(e) => setOrg(e.target.value)}>
      ${(orgs.length ? orgs : ['admin']).filter((o) => o !== '_system').map((o) => html`<option>${o}</option>`)}</select></p>
    <p><label for="user-password">Password (8 characters or more)</label><input id="user-password" type="password" value=${password} onInput=${(e) => setPassword(e.target.value)} required minlength="8" autocomplete="new-password" /></p>
    <p><button type="submit" class="primary" disabled=${busy}>Create the user</button></p>
    <div class="wide"><${ErrorBox} error=${error} title="Could not create the user" /></div>
  </form>`;
}

function Organizations({ orgs }) {
  const [name, setName] = useState('');
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      await request('POST', '/api/organizations', { body: { name } });
      setName('');
      orgs.reload();
    } catch (err) {
      setError(err);
    }
  };
  return html`<section aria-labelledby="orgs">
    <h2 id="orgs">Organizations</h2>
    <${ErrorBox} error=${orgs.error} title="Could not list the organizations" />
    ${orgs.data && html`<ul class="inline-list">${orgs.data.map((o) => html`<li>${o}</li>`)}</ul>`}
    <form onSubmit=${submit} class="row">
      <p><label for="org-name">New organization</label><input id="org-name" value=${name} onInput=${(e) => setName(e.target.value)} required spellcheck=${false} autocapitalize="none" /></p>
      <p><button type="submit">Create the organization</button></p>
    </form>
    <${ErrorBox} error=${error} title="Could not create the organization" />
  </section>`;
}

function Tokens() {
  const tokens = useLoad((signal) => request('GET', '/api/tokens', { signal }).then((r) => r.data), []);
  const [name, setName] = useState('');
  const [secret, setSecret] = useState(null);
  const [error, setError] = useState(null);
  const [revoking, setRevoking] = useState(null);
  const create = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      const r = await request('POST', '/api/tokens', { body: { name } });
      setSecret(r.data);
      setName('');
      tokens.reload();
    } catch (err) {
      setError(err);
    }
  };
  const revoke = async (t) => {
    setRevoking(null);
    setError(null);
    try {
      await request('DELETE', `/api/tokens/${t.id}`);
      tokens.reload();
    } catch (err) {
      setError(err);
    }
  };
  return html`<section aria-labelledby="tokens">
    <h2 id="tokens">Your API tokens</h2>
    <p class="muted">A token is a bearer secret of yours, for programs: it acts with your roles. Revoking one refuses it at once and ends the streams opened with it.</p>
    ${secret && html`<div class="notice" role="status"><p><strong>Token ${secret.name || secret.id} created.</strong> It is shown this once: copy it now.</p>
      <p><code class="secret">${secret.token}</code></p><p><button type="button" onClick=${() => setSecret(null)}>I copied it</button></p></div>`}
    <${ErrorBox} error=${tokens.error || error} title="Tokens" />
    ${tokens.data && (tokens.data.length === 0 ? html`<p>No token.</p>` : html`<${Scroll} label="Your API tokens"><table>
      <thead><tr><th scope="col">Token</th><th scope="col">Created</th><th scope="col">State</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${tokens.data.map((t) => html`<tr key=${t.id}>
        <th scope="row">${t.name || `#${t.id}`}</th><td><${When} at=${t.created} /></td>
        <td>${t.revoked ? html`revoked <${When} at=${t.revoked} />` : 'active'}</td>
        <td>${!t.revoked && html`<button type="button" class="danger small" onClick=${() => setRevoking(t)}>Revoke<span class="sr-only"> ${t.name || t.id}</span></button>`}</td>
      </tr>`)}</tbody></table></${Scroll}>`)}
    <form onSubmit=${create} class="row">
      <p><label for="token-name">New token's name</label><input id="token-name" value=${name} onInput=${(e) => setName(e.target.value)} required /></p>
      <p><button type="submit">Create a token</button></p>
    </form>
    ${revoking && html`<${Confirm} title=${`Revoke ${revoking.name || revoking.id}?`} action="Revoke the token" onConfirm=${() => revoke(revoking)} onCancel=${() => setRevoking(null)}>
      <p>Programs using it are refused at once.</p></${Confirm}>`}
  </section>`;
}

function Password({ who }) {
  const [password, setPassword] = useState('');
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setNotice('');
    try {
      await request('PUT', `/api/users/${encodeURIComponent(who.user)}/password`, { body: { password } });
      // The console keeps signing in with the new password, if it used
      // the old one.
      if (session()?.authorization.startsWith('Basic ')) await signIn('password', who.user, password);
      setPassword('');
      setNotice('Password changed. Streams opened with the old one end; your API tokens stay valid.');
    } catch (err) {
      setError(err);
    }
  };
  return html`<section aria-labelledby="password">
    <h2 id="password">Your password</h2>
    <form onSubmit=${submit} class="row">
      <p><label for="new-password">New password (8 characters or more)</label>
        <input id="new-password" type="password" value=${password} onInput=${(e) => setPassword(e.target.value)} required minlength="8" autocomplete="new-password" /></p>
      <p><button type="submit">Change your password</button></p>
    </form>
    <${ErrorBox} error=${error} title="Could not change the password" />
    <${Notice}>${notice}</${Notice}>
  </section>`;
}
