// scripts/setup.sh skips `npm ci` only when scripts/node-modules-current.mjs says node_modules matches the lockfile:
// each way the tree can differ from package-lock.json must make it say "install".
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = fileURLToPath(new URL('../../../scripts/node-modules-current.mjs', import.meta.url));
const dirs: string[] = [];

const entry = (version: string, extra: Record<string, unknown> = {}) => ({
  version,
  integrity: `sha512-${version}`,
  license: 'MIT',
  ...extra,
});

interface Lockfile {
  name: string;
  lockfileVersion: number;
  requires: boolean;
  packages: Record<string, Record<string, unknown>>;
}
interface ProjectFiles {
  lock: Lockfile;
  hidden: Lockfile | undefined;
  manifest: {
    name: string;
    dependencies: Record<string, string>;
    optionalDependencies: Record<string, string>;
  };
  dir: string;
}

/** A project whose node_modules is exactly what its lockfile says; `change` then breaks one thing. */
function project(change: (files: ProjectFiles) => void = () => {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'fenced-setup-'));
  dirs.push(dir);
  const manifest: ProjectFiles['manifest'] = {
    name: 'p',
    dependencies: { a: '^1.0.0' },
    optionalDependencies: { b: '^2.0.0' },
  };
  const lock: Lockfile = {
    name: 'p',
    lockfileVersion: 3,
    requires: true,
    packages: {
      '': { name: 'p', dependencies: { a: '^1.0.0' }, optionalDependencies: { b: '^2.0.0' } },
      'node_modules/a': entry('1.0.1'),
      'node_modules/b': entry('2.0.0', { optional: true, os: ['darwin'] }),
    },
  };
  const hidden = {
    name: 'p',
    lockfileVersion: 3,
    requires: true,
    packages: { 'node_modules/a': entry('1.0.1') },
  };
  mkdirSync(path.join(dir, 'node_modules/a'), { recursive: true });
  writeFileSync(path.join(dir, 'node_modules/a/package.json'), '{"name":"a","version":"1.0.1"}');
  const files: ProjectFiles = { lock, hidden, manifest, dir };
  change(files);
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify(files.manifest));
  writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify(files.lock));
  if (files.hidden !== undefined)
    writeFileSync(path.join(dir, 'node_modules/.package-lock.json'), JSON.stringify(files.hidden));
  return dir;
}

function current(dir: string): { code: number | null; out: string } {
  const result = spawnSync(process.execPath, [SCRIPT, dir], { encoding: 'utf8' });
  return { code: result.status, out: result.stdout + result.stderr };
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('node-modules-current (setup.sh skips npm ci only on a matching tree)', () => {
  it('says current when node_modules is what the lockfile pins (an optional package for another OS skipped)', () => {
    expect(current(project())).toEqual({ code: 0, out: 'node_modules matches package-lock.json\n' });
  });

  it('says install on a fresh clone: no node_modules record', () => {
    const result = current(project((f) => (f.hidden = undefined)));
    expect(result.code).toBe(1);
    expect(result.out).toContain('node_modules has no record of an install');
  });

  it('says install when the lockfile changed a version', () => {
    const result = current(project((f) => (f.lock.packages['node_modules/a'] = entry('1.0.2'))));
    expect(result.code).toBe(1);
    expect(result.out).toContain('node_modules/a differs from package-lock.json');
  });

  it('says install when the lockfile gained a package', () => {
    const result = current(project((f) => (f.lock.packages['node_modules/c'] = entry('3.0.0'))));
    expect(result.code).toBe(1);
    expect(result.out).toContain('node_modules/c is not installed');
  });

  it('says install when a package is gone from disk', () => {
    const result = current(project((f) => rmSync(path.join(f.dir, 'node_modules/a'), { recursive: true })));
    expect(result.code).toBe(1);
    expect(result.out).toContain('node_modules/a is missing from disk');
  });

  it('says install when package.json declares what the lockfile does not (npm ci then names it)', () => {
    const result = current(project((f) => (f.manifest.dependencies = { a: '^1.0.0', c: '^3.0.0' })));
    expect(result.code).toBe(1);
    expect(result.out).toContain('package.json: its dependencies differ from package-lock.json');
  });
});
