// A database as the signed-in user sees it (its label and the user's role
// on it), read once per session and shared by its views.
import { dbPath, onSession, request } from './api.js';
import { forgetModel } from './model.js';

const cache = new Map(); // "org/db" -> Promise<database>

// What one user read is not the next one's: a sign-out (by the user, or
// on a 401) and a sign-in in the same page forget it all, or the next
// user would see this one's role, label and admin controls.
onSession(() => cache.clear());

// loadDatabase returns GET /api/db/{org}/{db}: path, label, comment,
// schema_version and role (the signed-in user's).
export function loadDatabase(org, db) {
  const key = `${org}/${db}`;
  if (!cache.has(key)) {
    const p = request('GET', dbPath('/api/db', org, db)).then((r) => r.data);
    // A failure is not kept; a failure of an earlier session's read
    // leaves this session's alone.
    p.catch(() => cache.get(key) === p && cache.delete(key));
    cache.set(key, p);
  }
  return cache.get(key);
}

// forgetDatabase drops what is kept of org/db (after its schema or its
// existence changed).
export function forgetDatabase(org, db) {
  cache.delete(`${org}/${db}`);
  forgetModel(org, db);
}

// can reports whether role includes need (read < write < admin).
export const can = (role, need) => ['read', 'write', 'admin'].indexOf(role) >= ['read', 'write', 'admin'].indexOf(need);
