// Copies the ES module builds of Preact, its hooks and htm from
// node_modules (installed by `npm ci` from the pinned package-lock.json)
// into the Go package that embeds them, with a manifest of versions and
// SHA-256 sums (internal/console checks its embedded files against it)
// and the packages' licence texts.
//
//   node vendor.mjs <destination directory>
//
// `make console-assets` runs it; the result is committed, so building
// Sluice never needs npm or a network.
//
// The builds are copied as they are, but for two edits that let a browser
// load them without a bundler or an import map (an import map is an
// inline script, which the console's Content-Security-Policy forbids):
// the hooks' bare import of "preact" becomes the relative "./preact.js",
// and the sourceMappingURL comments, which name files not copied, go.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dest = process.argv[2];
if (!dest) {
  console.error('usage: node vendor.mjs <destination directory>');
  process.exit(2);
}

const files = [
  { name: 'preact.js', pkg: 'preact', path: 'dist/preact.mjs' },
  { name: 'preact-hooks.js', pkg: 'preact', path: 'hooks/dist/hooks.mjs', imports: { preact: './preact.js' } },
  { name: 'htm.js', pkg: 'htm', path: 'dist/htm.mjs' },
];

const modules = new URL('./node_modules/', import.meta.url).pathname;
const pkgJSON = (name) => JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8'));
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

rmSync(dest, { recursive: true, force: true });
mkdirSync(dest, { recursive: true });

const manifest = [];
for (const f of files) {
  const source = readFileSync(join(modules, f.pkg, f.path), 'utf8');
  let text = source.replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
  for (const [from, to] of Object.entries(f.imports ?? {})) {
    const before = text;
    text = text.replaceAll(`from"${from}"`, `from"${to}"`);
    if (text === before) throw new Error(`${f.path}: no import of "${from}" to rewrite`);
  }
  if (/from\s*"[^./]/.test(text)) throw new Error(`${f.path}: a bare import is left`);
  writeFileSync(join(dest, f.name), text);
  manifest.push({
    file: f.name, package: f.pkg, version: pkgJSON(f.pkg).version, path: f.path,
    source_sha256: sha256(source), sha256: sha256(text),
  });
}

let licences = `Third-party software in the files of this directory, with its licences,
as npm installed it from tools/console/package-lock.json.
`;
for (const name of [...new Set(files.map((f) => f.pkg))].sort()) {
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
