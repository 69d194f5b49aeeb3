// A comment that names a file of the repository names one that exists: file-head comments say which tests fail when
// the code breaks, and such a pointer rots silently when a test moves (three did before this test). Every comment line
// (`//`, ` *`, `--`) of the code and the tests, and every line of docs/*.md, is read; each `test/…`, `packages/…`,
// `docs/…`, `bench/…`, `scripts/…` or `demo/…` path in it with a file extension must exist, and so must a path
// relative to the citing package's src/ or lua/ (`nodes/repair.ts`, `include/node-state.lua`) whose first folder is
// one of that package's. A path with a glob (`test/fault/*.test.ts`) is a pattern, not a citation, and is skipped.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const FOLDERS = ['packages', 'test', 'bench', 'scripts', 'demo'];
const SKIP = new Set(['node_modules', 'dist', 'results', '.tmp', 'mutants']);
const CODE = /\.(ts|lua|mjs|cjs)$/;
const COMMENT = /^\s*(\/\/|\*|\/\*\*)/;
const LUA_COMMENT = /^\s*--/;
const EXTENSION = String.raw`\.(?:ts|lua|md|json|sql|sh|mjs|py)`;
/** A path from the repository's root; `../` before it (a Markdown link from docs/) is allowed. */
const CITED = new RegExp(
  String.raw`(?<![\w.*/-])(?:\.\.\/)*((?:test|packages|docs|bench|scripts|demo)\/[\w./*-]+${EXTENSION})(?![\w*])`,
  'g',
);
/** A path that may be relative to the citing package's src/ or lua/: `folder/…/file.ext`. */
const RELATIVE = new RegExp(String.raw`(?<![\w.*/@-])([a-z][\w-]*\/[\w./*-]+${EXTENSION})(?![\w*])`, 'g');

/**
 * Files named on purpose although they do not exist, each with the reason. Keep it short: a stale citation is
 * fixed, not listed here.
 */
const NAMED_NOT_SHIPPED: Readonly<Record<string, string>> = {};

function* codeFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir)) {
    if (SKIP.has(entry)) continue;
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) yield* codeFiles(full);
    else if (CODE.test(entry)) yield full;
  }
}

/** Every file whose citations are checked: the code and tests (comments only) and docs/*.md (every line). */
function citingFiles(): string[] {
  const files = FOLDERS.flatMap((folder) => [...codeFiles(path.join(ROOT, folder))]);
  const docs = readdirSync(path.join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => path.join(ROOT, 'docs', name));
  return [...files, ...docs];
}

/**
 * The folders a cited path may be relative to: the citing package's src/ and lua/, or for a file outside the packages
 * (tests, docs, bench) every package's. A relative path counts only when its first folder is one of these folders'.
 */
function packageFolders(file: string): string[] {
  const match = /^packages\/([\w-]+)\//.exec(path.relative(ROOT, file).split(path.sep).join('/'));
  const packages = match === null ? readdirSync(path.join(ROOT, 'packages')) : [match[1]!];
  return packages
    .flatMap((name) => ['src', 'lua'].map((base) => path.join(ROOT, 'packages', name, base)))
    .filter((base) => existsSync(base));
}

/** The lines of `text` that may cite paths: every line of Markdown, comment lines of code. */
function citingLines(file: string, text: string): [number, string][] {
  const lines = text.split('\n').map((line, i): [number, string] => [i + 1, line]);
  if (file.endsWith('.md')) return lines;
  const comment = file.endsWith('.lua') ? LUA_COMMENT : COMMENT;
  return lines.filter(([, line]) => comment.test(line));
}

/** `file:line cites path` for every cited path in `text` (the content of `file`) that does not exist. */
function staleCitations(file: string, text: string): string[] {
  const missing: string[] = [];
  const bases = packageFolders(file);
  const where = path.relative(ROOT, file);
  for (const [number, line] of citingLines(file, text)) {
    const cite = (target: string): void => {
      if (target.includes('*') || target.includes('.tmp.') || target in NAMED_NOT_SHIPPED) return;
      missing.push(`${where}:${number} cites ${target}`);
    };
    for (const [, cited] of line.matchAll(CITED)) {
      const target = cited!.replace(/[.]+$/, '');
      // `scripts/script-keys.ts` in a doc is the coordinator's src/scripts/, not the root's scripts/.
      const inPackage = bases.some((b) => existsSync(path.join(b, target)));
      if (!existsSync(path.join(ROOT, target)) && !inPackage) cite(target);
    }
    for (const [, cited] of line.matchAll(RELATIVE)) {
      const target = cited!.replace(/[.]+$/, '');
      const first = target.split('/')[0]!;
      // Only a path whose first folder is one of this package's: `ioredis/built/…` or `src/…` of another package is
      // not relative to this one.
      const homes = bases.filter((b) => existsSync(path.join(b, first)));
      if (homes.length === 0 || /^(test|packages|docs|bench|scripts|demo)$/.test(first)) continue;
      if (!homes.some((b) => existsSync(path.join(b, target)))) {
        cite(`${path.relative(ROOT, homes[0]!)}/${target}`);
      }
    }
  }
  return missing;
}

describe('paths cited in comments and docs', () => {
  it('name files that exist', () => {
    const missing = citingFiles().flatMap((file) => staleCitations(file, readFileSync(file, 'utf8')));
    expect(missing).toEqual([]);
  });

  it('are listed as named on purpose only while they do not exist', () => {
    const shipped = Object.keys(NAMED_NOT_SHIPPED).filter((cited) => existsSync(path.join(ROOT, cited)));
    expect(shipped).toEqual([]);
  });

  it('are found, so that a stale one fails the check above (negative control)', () => {
    const code = path.join(ROOT, 'packages/coordinator/src/nodes/example.ts');
    const text = [
      '// Tests that fail: test/unit/coordinator/nodes/gone.test.ts and test/unit/docs/cited-paths.test.ts.',
      ' * the argument lives in nodes/missing-step.ts, beside nodes/node-set.ts; see docs/nowhere.md',
      "const cite = 'test/unit/not-a-comment.test.ts';",
      '// a pattern, not a file: test/fault/*.test.ts; a package: ioredis/built/Redis.js',
    ].join('\n');
    expect(staleCitations(code, text)).toEqual([
      'packages/coordinator/src/nodes/example.ts:1 cites test/unit/coordinator/nodes/gone.test.ts',
      'packages/coordinator/src/nodes/example.ts:2 cites docs/nowhere.md',
      'packages/coordinator/src/nodes/example.ts:2 cites packages/coordinator/src/nodes/missing-step.ts',
    ]);
    const doc = path.join(ROOT, 'docs/example.md');
    expect(
      staleCitations(doc, 'See [the test](../test/unit/gone.test.ts) and `packages/shared/src/index.ts`.'),
    ).toEqual(['docs/example.md:1 cites test/unit/gone.test.ts']);
  });
});
