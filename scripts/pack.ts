// `npm run pack`: the installable tarballs of every public package, in one command. Nothing of fenced is on the
// npm registry yet; this is how to install it outside this repository:
//
//   npm run pack                      # writes tarballs/fenced-<name>-<version>.tgz, one per public package
//   npm install /path/to/fenced/tarballs/fenced-{shared,coordinator,guarded-store}-0.1.0.tgz kysely pg
//
// A user installs the tarballs of one use (INSTALL_SETS), never necessarily all five.
//
// Each package's `prepack` script builds it (`tsc -b`), so a fresh clone packs a complete `dist/` without a
// separate build. `--out <dir>` writes the tarballs somewhere else (the package check uses a temporary one).
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The public packages, by folder under packages/ (test-utils is private and never packed). */
export const PUBLIC_PACKAGES = ['shared', 'coordinator', 'service', 'guarded-store', 'redlock'] as const;

/** What each use needs: the public packages (by folder) to install together, and what else from npm. */
export const INSTALL_SETS: readonly {
  use: string;
  folders: readonly (typeof PUBLIC_PACKAGES)[number][];
  alsoFromNpm: readonly string[];
}[] = [
  {
    use: 'the library with the Postgres guard',
    folders: ['shared', 'coordinator', 'guarded-store'],
    alsoFromNpm: ['kysely', 'pg'],
  },
  { use: 'leases and tokens only, no guard', folders: ['shared', 'coordinator'], alsoFromNpm: [] },
  {
    use: "node-redlock's API (@fenced/redlock)",
    folders: ['shared', 'coordinator', 'redlock'],
    alsoFromNpm: [],
  },
  { use: 'the HTTP service', folders: ['shared', 'coordinator', 'service'], alsoFromNpm: [] },
];

/** One packed package: its name, its tarball's path and the files in it. */
export interface PackedPackage {
  name: string;
  folder: (typeof PUBLIC_PACKAGES)[number];
  tarball: string;
  files: string[];
}

interface NpmPackResult {
  name: string;
  filename: string;
  files: { path: string }[];
}

/** `npm pack` of every public package into `outDir` (created if missing); its `prepack` builds it first. */
export function packAll(outDir: string): PackedPackage[] {
  mkdirSync(outDir, { recursive: true });
  return PUBLIC_PACKAGES.map((folder) => {
    const output = execFileSync('npm', ['pack', '--json', '--pack-destination', outDir, '--loglevel=error'], {
      cwd: join(root, 'packages', folder),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // npm prints the prepack script's own output before the JSON; the JSON is the last top-level array.
    const [packed] = JSON.parse(output.slice(output.lastIndexOf('\n[') + 1)) as NpmPackResult[];
    if (packed === undefined) throw new Error(`npm pack gave no result for packages/${folder}`);
    return {
      name: packed.name,
      folder,
      tarball: join(outDir, packed.filename),
      files: packed.files.map((file) => file.path),
    };
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const outIndex = args.indexOf('--out');
  const outArg = outIndex === -1 ? undefined : args[outIndex + 1];
  if (outIndex !== -1 && (outArg === undefined || outArg.startsWith('-'))) {
    console.error(
      `--out needs a directory (given: ${outArg === undefined ? 'nothing' : JSON.stringify(outArg)})`,
    );
    process.exit(2);
  }
  const unknown = args.filter((arg, i) => !(arg === '--out' || (outIndex !== -1 && i === outIndex + 1)));
  if (unknown.length > 0) {
    console.error(`unknown argument ${JSON.stringify(unknown[0])}; allowed: --out <dir>`);
    process.exit(2);
  }
  const outDir = resolve(outArg ?? join(root, 'tarballs'));
  const packed = packAll(outDir);
  for (const { name, tarball, files } of packed) console.log(`${name}: ${tarball} (${files.length} files)`);
  console.log('\nInstall the ones your use needs (not all five), in your project:');
  for (const set of INSTALL_SETS) {
    const files = set.folders.map((folder) => packed.find((p) => p.folder === folder)!.tarball);
    console.log(`\n  ${set.use}:\n    npm install ${[...files, ...set.alsoFromNpm].join(' ')}`);
  }
}
