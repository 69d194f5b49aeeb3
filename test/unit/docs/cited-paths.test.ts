// A comment that names a file of the repository names one that exists: file-head comments say which tests fail when
// the code breaks, and such a pointer rots silently when a test moves (three did before this test). Every comment line
// (`//`, ` *`, `--`) of the code and the tests is read; each `test/…`, `packages/…`, `docs/…`, `bench/…`, `scripts/…`
// or `demo/…` path in it with a file extension must exist. Paths relative to a package's src/ (`nodes/repair.ts`) are
// not checked: they are ambiguous from the repository's root.
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
const CITED =
  /(?<![\w./-])((?:test|packages|docs|bench|scripts|demo)\/[\w./-]+\.(?:ts|lua|md|json|sql|sh|mjs|py))/g;

function* codeFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir)) {
    if (SKIP.has(entry)) continue;
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) yield* codeFiles(full);
    else if (CODE.test(entry)) yield full;
  }
}

describe('paths cited in comments', () => {
  it('name files that exist', () => {
    const missing: string[] = [];
    for (const folder of FOLDERS) {
      for (const file of codeFiles(path.join(ROOT, folder))) {
        readFileSync(file, 'utf8')
          .split('\n')
          .forEach((line, i) => {
            if (!(file.endsWith('.lua') ? LUA_COMMENT : COMMENT).test(line)) return;
            for (const [, cited] of line.matchAll(CITED)) {
              const target = cited!.replace(/[.]+$/, '');
              // Files a run writes (bench/results/*.tmp.json) are named, not shipped.
              if (target.includes('.tmp.')) continue;
              if (!existsSync(path.join(ROOT, target))) {
                missing.push(`${path.relative(ROOT, file)}:${i + 1} cites ${target}`);
              }
            }
          });
      }
    }
    expect(missing).toEqual([]);
  });
});
