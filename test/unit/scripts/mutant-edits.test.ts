import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  applyEdits,
  type Edit,
  locateEdits,
  locateTest,
  MutantTableError,
  searchedFolders,
  type Suite,
} from '../../../scripts/mutant-edits.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

let root: string;

function write(file: string, text: string): void {
  mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
  writeFileSync(path.join(root, file), text);
}

function move(from: string, to: string): void {
  mkdirSync(path.dirname(path.join(root, to)), { recursive: true });
  renameSync(path.join(root, from), path.join(root, to));
}

function read(file: string): string {
  return readFileSync(path.join(root, file), 'utf8');
}

function locate(edits: readonly Edit[]) {
  return locateEdits(root, '99', searchedFolders(root, '99', 'pkg'), edits);
}

/** The located edits applied to the files as they are on disk. */
function mutate(edits: readonly Edit[]): Map<string, string> {
  const located = locate(edits);
  return applyEdits(located, new Map(located.map((e) => [e.file, read(e.file)])));
}

function thrown(fn: () => unknown): MutantTableError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(MutantTableError);
    return error as MutantTableError;
  }
  throw new Error('expected a MutantTableError, nothing was thrown');
}

const LEASE = [
  'export function validity(ttl: number, elapsed: number): number {',
  '  const left = ttl - elapsed;',
  '  if (left <= MIN_VALIDITY) return 0;',
  '  return left;',
  '}',
  '',
].join('\n');

const BREAK_MIN_VALIDITY: Edit = {
  find: ['  const left = ttl - elapsed;', '  if (left <= MIN_VALIDITY) return 0;'],
  replace: ['  const left = ttl - elapsed;', '  if (left <= 0) return 0;'],
};

beforeEach(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'fenced-mutant-edits-'));
  write('packages/pkg/src/lease.ts', LEASE);
  write('packages/pkg/src/other.ts', 'export const other = 1;\n');
  write('packages/pkg/lua/acquire.lua', "redis.call('SET', KEYS[1], ARGV[1], 'NX')\nreturn 1\n");
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('locating an edit', () => {
  it('finds the snippet, whole lines, and replaces exactly it', () => {
    const mutated = mutate([BREAK_MIN_VALIDITY]);
    expect([...mutated.keys()]).toEqual(['packages/pkg/src/lease.ts']);
    expect(mutated.get('packages/pkg/src/lease.ts')).toBe(LEASE.replace('<= MIN_VALIDITY', '<= 0'));
  });

  it('still finds it after its file moved to another folder, and reports the new place', () => {
    move('packages/pkg/src/lease.ts', 'packages/pkg/src/lease/validity.ts');
    const [located] = locate([BREAK_MIN_VALIDITY]);
    expect(located!.file).toBe('packages/pkg/src/lease/validity.ts');
    expect(mutate([BREAK_MIN_VALIDITY]).get('packages/pkg/src/lease/validity.ts')).toBe(
      LEASE.replace('<= MIN_VALIDITY', '<= 0'),
    );
  });

  it('searches lua/ as well as src/', () => {
    const edit: Edit = {
      find: ["redis.call('SET', KEYS[1], ARGV[1], 'NX')", 'return 1'],
      replace: ["redis.call('SET', KEYS[1], ARGV[1])", 'return 1'],
    };
    expect(mutate([edit]).get('packages/pkg/lua/acquire.lua')).toBe(
      "redis.call('SET', KEYS[1], ARGV[1])\nreturn 1\n",
    );
  });

  it('fails loudly, naming the mutant and the snippet, when the code it breaks is gone', () => {
    write('packages/pkg/src/lease.ts', LEASE.replace('MIN_VALIDITY', 'minValidityMs'));
    const error = thrown(() => locate([BREAK_MIN_VALIDITY]));
    expect(error.message).toContain('mutant 99, edit 1 of 1');
    expect(error.message).toContain('in no file under packages/pkg/src, packages/pkg/lua');
    expect(error.message).toContain('    |   if (left <= MIN_VALIDITY) return 0;');
  });

  it('fails loudly, naming both places, when the snippet matches twice in the tree', () => {
    write('packages/pkg/src/nodes/copy.ts', LEASE);
    const error = thrown(() => locate([BREAK_MIN_VALIDITY]));
    expect(error.message).toContain('matches 2 times');
    expect(error.message).toContain('packages/pkg/src/lease.ts:2');
    expect(error.message).toContain('packages/pkg/src/nodes/copy.ts:2');
    expect(error.message).toContain('    |   const left = ttl - elapsed;');
  });

  it('counts a match twice in one file as ambiguous too', () => {
    write('packages/pkg/src/lease.ts', LEASE + LEASE);
    expect(thrown(() => locate([BREAK_MIN_VALIDITY])).message).toContain('matches 2 times');
  });

  it('matches whole lines only at their ends: a snippet line must end where the source line ends', () => {
    const edit: Edit = { find: ['  const left = ttl', '  if (left <= MIN_VALIDITY) return 0;'], replace: [] };
    expect(thrown(() => locate([edit])).message).toContain('in no file');
  });

  it('applies several edits of one mutant, in one file or more, and refuses overlapping ones', () => {
    const second: Edit = { find: ['  return left;', '}'], replace: ['  return left + 1;', '}'] };
    const lua: Edit = {
      find: ["redis.call('SET', KEYS[1], ARGV[1], 'NX')", 'return 1'],
      replace: ['return 1'],
    };
    const mutated = mutate([second, BREAK_MIN_VALIDITY, lua]);
    expect(mutated.get('packages/pkg/src/lease.ts')).toBe(
      LEASE.replace('<= MIN_VALIDITY', '<= 0').replace('return left;', 'return left + 1;'),
    );
    expect(mutated.get('packages/pkg/lua/acquire.lua')).toBe('return 1\n');
    const overlapping: Edit = {
      find: ['  if (left <= MIN_VALIDITY) return 0;', '  return left;'],
      replace: [],
    };
    expect(thrown(() => locate([BREAK_MIN_VALIDITY, overlapping])).message).toContain(
      'edits 1 and 2 overlap',
    );
  });

  it('fails loudly on a package with no src/ or lua/', () => {
    expect(thrown(() => searchedFolders(root, '99', 'nope')).message).toContain('package "nope"');
  });
});

describe('locating a killing test', () => {
  it('finds a test file by name anywhere under its suite, also after it moved into a sub-folder', () => {
    write('test/unit/coordinator/lease.test.ts', '');
    expect(locateTest(root, '99', 'unit', 'lease.test.ts')).toBe('test/unit/coordinator/lease.test.ts');
    move('test/unit/coordinator/lease.test.ts', 'test/unit/coordinator/lease/lease.test.ts');
    expect(locateTest(root, '99', 'unit', 'lease.test.ts')).toBe('test/unit/coordinator/lease/lease.test.ts');
  });

  it('fails loudly when the file is missing, or named twice in the suite', () => {
    write('test/integration/coordinator/errors.test.ts', '');
    write('test/unit/shared/errors.test.ts', '');
    expect(thrown(() => locateTest(root, '99', 'unit', 'gone.test.ts')).message).toContain(
      'mutant 99: no killing test file gone.test.ts under test/unit/',
    );
    expect(locateTest(root, '99', 'integration', 'errors.test.ts')).toBe(
      'test/integration/coordinator/errors.test.ts',
    );
    write('test/integration/http/errors.test.ts', '');
    expect(thrown(() => locateTest(root, '99', 'integration', 'errors.test.ts')).message).toContain(
      'test/integration/coordinator/errors.test.ts, test/integration/http/errors.test.ts',
    );
  });
});

describe("the project's mutation table", () => {
  // The same check `npm run mutants` makes before it runs anything, here in `npm test`, so a change that
  // moves or rewrites the code a mutant breaks shows up at once, not at the next mutation run.
  const table = JSON.parse(readFileSync(path.join(REPO, 'test/mutants/mutants.json'), 'utf8')) as {
    mutants: {
      id: string;
      package: string;
      edits: Edit[];
      killedBy: { suite: Suite; test: string }[];
    }[];
  };

  it.each(table.mutants.map((m) => [m.id, m] as const))('mutant %s locates in this tree', (_id, m) => {
    const located = locateEdits(REPO, m.id, searchedFolders(REPO, m.id, m.package), m.edits);
    expect(located).toHaveLength(m.edits.length);
    for (const k of m.killedBy) expect(locateTest(REPO, m.id, k.suite, k.test)).toMatch(/\.test\.ts$/);
  });
});
