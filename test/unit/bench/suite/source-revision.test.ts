// The files a bench run names as modified (bench/suite/environment.ts `sourceRevision`), read from a real
// throw-away git repository.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { modifiedPaths, sourceRevision } from '../../../../bench/suite/environment.js';

const repo = mkdtempSync(path.join(os.tmpdir(), 'fenced-source-revision-'));
const git = (...args: string[]): void => {
  const result = spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], {
    cwd: repo,
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`git ${args.join(' ')}: ${result.stderr}`);
};
afterAll(() => rmSync(repo, { recursive: true, force: true }));

describe('sourceRevision', () => {
  it('names every modified file under packages/ with its whole path (the first one included)', () => {
    mkdirSync(path.join(repo, 'packages', 'a'), { recursive: true });
    writeFileSync(path.join(repo, 'packages', 'a', 'one.ts'), 'one\n');
    writeFileSync(path.join(repo, 'packages', 'a', 'two.ts'), 'two\n');
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'start');
    // Unstaged changes: porcelain lines that start with a space.
    writeFileSync(path.join(repo, 'packages', 'a', 'one.ts'), 'changed\n');
    writeFileSync(path.join(repo, 'packages', 'a', 'two.ts'), 'changed\n');
    const revision = sourceRevision(repo);
    expect(revision.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(revision.modifiedPackageFiles).toEqual(['packages/a/one.ts', 'packages/a/two.ts']);
  });
});

describe('modifiedPaths', () => {
  it('reads staged, untracked and renamed files (a rename counts as its new path)', () => {
    const porcelain = 'M  packages/a.ts\n?? packages/b.ts\nR  packages/old.ts -> packages/new.ts\n';
    expect(modifiedPaths(porcelain)).toEqual(['packages/a.ts', 'packages/b.ts', 'packages/new.ts']);
  });

  it('names nothing for a clean tree', () => {
    expect(modifiedPaths('')).toEqual([]);
  });
});
