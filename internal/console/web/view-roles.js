// The roles granted on a database, for its admins: who has which role,
// and a form to grant, change or take one away.
import { useState } from './preact-hooks.js';
import { dbPath, request } from './api.js';
import { ErrorBox, Notice, Scroll, html, useLoad } from './ui.js';

export function Roles({ org, db }) {
  const path = dbPath('/api/roles', org, db);
  const list = useLoad((signal) => request('GET', path, { signal }).then((r) => r.data), [org, db]);
  const [user, setUser] = useState('');
  const [role, setRole] = useState('read');
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState(false);
  const grant = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setNotice('');
    try {
      await request('PUT', path, { body: { user, role } });
      setNotice(role === 'none' ? `${user} has no role on ${org}/${db} now.` : `${user} has the ${role} role on ${org}/${db} now.`);
      list.reload();
    } catch (err) {
      setError(err);
    }
    setBusy(false);
  };
  return html`<section aria-labelledby="roles">
    <h2 id="roles">Roles</h2>
    ${Array.isArray(list.data) && (list.data.length === 0 ? html`<p>No user has a role on this database (the super user has every right).</p>`
      : html`<${Scroll} label="Roles"><table>
        <thead><tr><th scope="col">User</th><th scope="col">Role</th></tr></thead>
        <tbody>${list.data.map((g) => html`<tr key=${g.user}><th scope="row">${g.user}</th><td>${g.role}</td></tr>`)}</tbody>
      </table></${Scroll}>`)}
    <form onSubmit=${grant} class="row" aria-busy=${busy}>
      <p><label for="role-user">User</label><input id="role-user" value=${user} onInput=${(e) => setUser(e.target.value)} required spellcheck=${false} autocapitalize="none" /></p>
      <p><label for="role-role">Role</label><select id="role-role" value=${role} onChange=${(e) => setRole(e.target.value)}>
        <option value="read">read</option><option value="write">write</option><option value="admin">admin</option><option value="none">none (take it away)</option>
      </select></p>
      <p><button type="submit" class="primary" disabled=${busy}>Set the role</button></p>
    </form>
    <${ErrorBox} error=${error} title="Could not set the role" />
    <${Notice}>${notice}</${Notice}>
  </section>`;
}
