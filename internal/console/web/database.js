// A database as the signed-in user sees it (its label and the user's role
// on it), read once per page load and shared by its views.
import { dbPath, request } from './api.js';
import { forgetModel } from './model.js';

const cache = new Map();

// loadDatabase returns GET /api/db/{org}/{db}: path, label, comment,
// schema_version and role (the user's).
export function loadDatabase(org, db) {
  const key = `${org}/${db}`;
  if (!cache.has(key)) {
    const p = request('GET', dbPath('/api/db', org, db)).then((r) => r.data);
    p.catch(() => cache.delete(key));
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
