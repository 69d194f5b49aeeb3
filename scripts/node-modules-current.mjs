// Exits 0 when node_modules already holds exactly what package-lock.json pins, so scripts/setup.sh can skip
// `npm ci`; exits 1 (saying why) when an install is needed. Plain JavaScript: it runs before anything is installed.
//
// npm records what it installed in node_modules/.package-lock.json (the "hidden lockfile"). The tree is current when
//   - the hidden lockfile exists, and every package in it is in package-lock.json with the same entry (version,
//     integrity, dependencies, ...) and has its package.json on disk;
//   - every package of package-lock.json missing from it is optional (npm skips optional packages built for other
//     platforms);
//   - every workspace's package.json declares the same dependencies as package-lock.json records for it (an edited
//     package.json with a stale lockfile is left to `npm ci`, which says what is out of sync).
import console from 'node:console';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { URL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

// The repository, or the project directory given as the first argument (the tests use one of their own).
const root = process.argv[2] ?? new URL('..', import.meta.url).pathname;
const DEPENDENCY_FIELDS = [
  'dependencies',
  'devDependencies',
  'peerDependencies',
  'peerDependenciesMeta',
  'optionalDependencies',
];

function stale(reason) {
  console.log(`npm ci needed: ${reason}`);
  process.exit(1);
}

const readJson = (path) => JSON.parse(readFileSync(join(root, path), 'utf8'));
if (!existsSync(join(root, 'package-lock.json'))) stale('no package-lock.json');
if (!existsSync(join(root, 'node_modules/.package-lock.json')))
  stale('node_modules has no record of an install');
const locked = readJson('package-lock.json').packages ?? {};
const installed = readJson('node_modules/.package-lock.json').packages ?? {};

for (const [path, entry] of Object.entries(installed)) {
  if (!isDeepStrictEqual(locked[path], entry)) stale(`${path} differs from package-lock.json`);
  if (path.startsWith('node_modules/') && !existsSync(join(root, path, 'package.json'))) {
    stale(`${path} is missing from disk`);
  }
}
for (const [path, entry] of Object.entries(locked)) {
  if (path === '' || path in installed) continue;
  if (entry.optional !== true) stale(`${path} is not installed`);
}
for (const path of Object.keys(locked).filter((p) => p === '' || !p.includes('node_modules/'))) {
  const manifest = readJson(join(path, 'package.json'));
  for (const field of DEPENDENCY_FIELDS) {
    if (!isDeepStrictEqual(manifest[field] ?? {}, locked[path][field] ?? {})) {
      stale(`${join(path, 'package.json')}: its ${field} differ from package-lock.json`);
    }
  }
}
console.log('node_modules matches package-lock.json');
