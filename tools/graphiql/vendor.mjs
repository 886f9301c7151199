// Copies the browser builds of GraphiQL and its runtime from node_modules
// (installed by `npm ci` from the pinned package-lock.json) into the Go
// package that embeds them, with a manifest of versions and SHA-256 sums
// (internal/graphiql checks its embedded files against it) and the licence
// texts of every package those builds contain.
//
//   node vendor.mjs <destination directory>
//
// `make graphiql-assets` runs it; the result is committed, so building
// Sluice never needs npm or a network.
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dest = process.argv[2];
if (!dest) {
  console.error('usage: node vendor.mjs <destination directory>');
  process.exit(2);
}

// Each served file: where it comes from in node_modules. The UMD builds
// need no bundler: graphiql's takes React and ReactDOM from globals and
// contains graphql-js, CodeMirror and its other dependencies; graphql-sse's
// defines the global graphqlSse. React 18 is the last major with UMD builds.
const files = [
  { name: 'react.production.min.js', pkg: 'react', path: 'umd/react.production.min.js' },
  { name: 'react-dom.production.min.js', pkg: 'react-dom', path: 'umd/react-dom.production.min.js' },
  { name: 'graphiql.min.js', pkg: 'graphiql', path: 'graphiql.min.js' },
  { name: 'graphiql.min.css', pkg: 'graphiql', path: 'graphiql.min.css' },
  { name: 'graphql-sse.min.js', pkg: 'graphql-sse', path: 'umd/graphql-sse.min.js' },
];

const modules = new URL('./node_modules/', import.meta.url).pathname;
const pkgJSON = (name) => JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8'));
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

rmSync(dest, { recursive: true, force: true });
mkdirSync(dest, { recursive: true });

const manifest = [];
for (const f of files) {
  const from = join(modules, f.pkg, f.path);
  copyFileSync(from, join(dest, f.name));
  manifest.push({ file: f.name, package: f.pkg, version: pkgJSON(f.pkg).version, path: f.path, sha256: sha256(readFileSync(from)) });
}

// The packages inside the copied builds: the copied packages and
// everything they depend on at run time (graphiql's UMD bundles its whole
// dependency tree), each with its licence text.
const seen = new Set();
const queue = [...new Set(files.map((f) => f.pkg))];
while (queue.length) {
  const name = queue.shift();
  if (seen.has(name)) continue;
  seen.add(name);
  for (const dep of Object.keys(pkgJSON(name).dependencies ?? {})) {
    if (existsSync(join(modules, dep, 'package.json'))) queue.push(dep);
  }
}
// graphiql's UMD bundles graphql-js, a peer dependency.
if (existsSync(join(modules, 'graphql', 'package.json'))) seen.add('graphql');

let licences = `Third-party software in the files of this directory, with its licences: the
copied packages and their run-time dependencies as npm installed them from
tools/graphiql/package-lock.json (graphiql.min.js was bundled by GraphiQL's
authors from these packages, possibly at other patch versions).
`;
for (const name of [...seen].sort()) {
  const p = pkgJSON(name);
  const dir = join(modules, name);
  const text = readdirSync(dir)
    .filter((n) => /^(licen[cs]e|copying)(\..*)?$/i.test(n))
    .map((n) => readFileSync(join(dir, n), 'utf8').trim())
    .join('\n\n');
  licences += `\n${'='.repeat(72)}\n${name} ${p.version} (${p.license ?? 'see below'})\n${'='.repeat(72)}\n\n${text || `No licence file in the package; package.json says: ${p.license}`}\n`;
}
writeFileSync(join(dest, 'LICENSES.txt'), licences);
writeFileSync(join(dest, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
for (const m of manifest) console.log(`${m.file}  ${m.package}@${m.version}`);
console.log(`LICENSES.txt  ${seen.size} packages`);
