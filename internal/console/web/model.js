// What the console knows of a database's classes, read from its GraphQL
// schema by introspection. The schema is the signed-in user's: a field
// its role may not read is not in it, so no view can ask for one.
import { graphql, onSession } from './api.js';

const typeRef = 'kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } }';

const introspection = `{
  __schema {
    queryType { fields { name } }
    mutationType { fields { name } }
    types {
      kind name description
      fields { name type { ${typeRef} } }
      inputFields { name type { ${typeRef} } }
      enumValues { name }
      possibleTypes { name }
    }
  }
}`;

// unwrap turns a GraphQL type reference into { named, kind, list, required }.
function unwrap(t) {
  let required = false;
  let list = false;
  if (t.kind === 'NON_NULL') {
    required = true;
    t = t.ofType;
  }
  if (t.kind === 'LIST') {
    list = true;
    t = t.ofType;
    if (t.kind === 'NON_NULL') t = t.ofType;
  }
  return { named: t.name, kind: t.kind, list, required };
}

const cache = new Map(); // "org/db" -> Promise<Model>

// A model is the signed-in user's schema, with the fields that user may
// read: a sign-out (by the user, or on a 401) and a sign-in in the same
// page forget every model, or the next user would see this one's classes
// and fields, @private ones included.
onSession(() => cache.clear());

// loadModel returns the model of database org/db, introspected once per
// session (forgetModel drops it after a schema change).
export function loadModel(org, db) {
  const key = `${org}/${db}`;
  if (!cache.has(key)) {
    const p = graphql(org, db, introspection).then(({ data }) => buildModel(data.__schema));
    // A failure is not kept; a failure of an earlier session's read
    // leaves this session's alone.
    p.catch(() => cache.get(key) === p && cache.delete(key));
    cache.set(key, p);
  }
  return cache.get(key);
}

// forgetModel drops what loadModel keeps of org/db.
export function forgetModel(org, db) {
  cache.delete(`${org}/${db}`);
}

// buildModel returns { classes: [Class], byName, types } where a Class is
// { name, abstract, interface, fields: [Field], subclasses, insertable }
// and a Field is { name, named, kind, list, required, ref, subdoc,
// enumValues, filterOps, orderable }.
function buildModel(schema) {
  const types = new Map(schema.types.map((t) => [t.name, t]));
  const queries = new Set(schema.queryType.fields.map((f) => f.name));
  const mutations = new Set((schema.mutationType?.fields || []).map((f) => f.name));
  const classNames = [...queries].filter((q) => !q.startsWith('_') && queries.has(`${q}_aggregate`) && types.has(q)).sort();
  const isClass = (n) => classNames.includes(n);
  const classes = classNames.map((name) => {
    const t = types.get(name);
    const filter = types.get(`${name}_Filter`);
    const ordering = types.get(`${name}_Ordering`);
    const orderable = new Set((ordering?.inputFields || []).map((f) => f.name));
    const filterFields = new Map((filter?.inputFields || []).map((f) => [f.name, unwrap(f.type)]));
    const fields = (t.fields || [])
      .filter((f) => !f.name.startsWith('_'))
      .map((f) => {
        const u = unwrap(f.type);
        const ft = types.get(u.named);
        const ref = isClass(u.named);
        const subdoc = !ref && (u.kind === 'OBJECT' || u.kind === 'INTERFACE');
        const fi = filterFields.get(f.name);
        const opsType = fi && types.get(fi.named);
        return {
          name: f.name, named: u.named, kind: u.kind, list: u.list, required: u.required, ref, subdoc,
          enumValues: u.kind === 'ENUM' ? (ft?.enumValues || []).map((v) => v.name) : null,
          filterOps: opsType?.inputFields ? opsType.inputFields.map((o) => o.name) : [],
          orderable: orderable.has(f.name),
        };
      });
    const possible = t.kind === 'INTERFACE' ? (t.possibleTypes || []).map((p) => p.name) : [];
    return {
      name, abstract: t.kind === 'INTERFACE' && !mutations.has(`${name}_insert`), interface: t.kind === 'INTERFACE',
      fields, subclasses: possible, insertable: mutations.has(`${name}_insert`),
    };
  });
  return { classes, byName: new Map(classes.map((c) => [c.name, c])), types };
}

// selection returns the GraphQL selection of a class's fields for a
// table: scalars and enums as they are, references as their ids, and
// subdocuments with their own scalar fields (depth bounds the nesting).
export function selection(model, fields, depth = 2) {
  const parts = [];
  for (const f of fields) {
    if (f.ref) parts.push(`${f.name} { _id }`);
    else if (f.subdoc) {
      if (depth <= 0) continue;
      const t = model.types.get(f.named);
      const sub = (t?.fields || []).filter((x) => !x.name.startsWith('_')).map((x) => {
        const u = unwrap(x.type);
        const ref = model.byName.has(u.named);
        const subdoc = !ref && (u.kind === 'OBJECT' || u.kind === 'INTERFACE');
        return { name: x.name, named: u.named, kind: u.kind, ref, subdoc };
      });
      const inner = selection(model, sub, depth - 1);
      if (inner) parts.push(`${f.name} { ${inner} }`);
    } else parts.push(f.name);
  }
  return parts.join(' ');
}

// countFields returns how many fields a selection holds (the daemon bounds
// a query's fields: graphql_max_fields).
export const countFields = (sel) => (sel.match(/[A-Za-z_][A-Za-z0-9_]*(?=\s|$|\s*\{)/g) || []).length;
