// Locating the mutation table's edits and killing tests (scripts/mutants.ts; the table is test/mutants/mutants.json).
//
// A mutant is a list of search-and-replace edits, not a patch with line numbers and context: each edit's `find` is
// the exact code it breaks (whole lines), searched for in every file of its package's source tree (src/ and lua/),
// wherever that file lives now. It must match exactly once in the whole tree: a snippet that is gone (the code
// changed) or that matches twice (it no longer says which code it breaks) is an error naming the mutant, the edit
// and the snippet — never a silent skip, never a guess. A killing test is a file name searched for under its
// suite's folder (test/unit, test/integration, test/fault), so tests can move into sub-folders; it too must match
// exactly once. Moving files therefore never breaks the table; changing the broken code does, loudly.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** One search-and-replace: whole lines, each without its line ending. */
export interface Edit {
  readonly find: readonly string[];
  readonly replace: readonly string[];
}

export const SUITES = ['unit', 'integration', 'fault'] as const;
export type Suite = (typeof SUITES)[number];

/** Where an edit's snippet was found: the file (relative to the root, `/`-separated) and the offset in it. */
export interface LocatedEdit {
  readonly index: number;
  readonly file: string;
  readonly offset: number;
  readonly find: string;
  readonly replace: string;
}

/** The table says something the tree cannot honour: a snippet or test that is gone or ambiguous, a bad entry. */
export class MutantTableError extends Error {
  override readonly name = 'MutantTableError';
}

/** The folders of a package that are searched for snippets (those that exist). */
export const SEARCHED = ['src', 'lua'] as const;

/** The text an edit's lines stand for: every line ends with `\n` (so an empty list is the empty text). */
export function snippetText(lines: readonly string[]): string {
  return lines.map((line) => `${line}\n`).join('');
}

/** Every file under `dir` (relative to `root`, `/`-separated, sorted); node_modules and dist are skipped. */
export function filesUnder(root: string, dir: string): string[] {
  const found: string[] = [];
  const walk = (relative: string): void => {
    let entries;
    try {
      entries = readdirSync(path.join(root, relative), { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const child = `${relative}/${entry.name}`;
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== 'dist') walk(child);
      } else if (entry.isFile()) found.push(child);
    }
  };
  walk(dir);
  return found.sort();
}

/** The searched folders of `packages/<pkg>`, relative to the root; an error when the package has none of them. */
export function searchedFolders(root: string, mutantId: string, pkg: string): string[] {
  const folders = SEARCHED.map((sub) => `packages/${pkg}/${sub}`).filter(
    (dir) => filesUnder(root, dir).length > 0,
  );
  if (folders.length === 0) {
    throw new MutantTableError(
      `mutant ${mutantId}: package ${JSON.stringify(pkg)} has no ${SEARCHED.join('/ or ')}/ folder with files ` +
        `under packages/ (the package is the folder name, e.g. "coordinator")`,
    );
  }
  return folders;
}

function offsetsOf(text: string, snippet: string): number[] {
  const offsets: number[] = [];
  for (let at = text.indexOf(snippet); at !== -1; at = text.indexOf(snippet, at + 1)) offsets.push(at);
  return offsets;
}

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

function quoted(snippet: string): string {
  return snippet
    .replace(/\n$/, '')
    .split('\n')
    .map((line) => `    | ${line}`)
    .join('\n');
}

/**
 * Finds each edit's snippet in the files under `folders` (relative to `root`): exactly once in all of them, or a
 * MutantTableError naming the mutant, the edit and the snippet (and, when it matched more than once, where). Two
 * edits of one mutant may not overlap. `read` returns a file's content (the disk by default).
 */
export function locateEdits(
  root: string,
  mutantId: string,
  folders: readonly string[],
  edits: readonly Edit[],
  read: (file: string) => string = (file) => readFileSync(path.join(root, file), 'utf8'),
): LocatedEdit[] {
  const files = folders.flatMap((dir) => filesUnder(root, dir));
  const contents = new Map(files.map((file) => [file, read(file)]));
  const located = edits.map((edit, index): LocatedEdit => {
    const find = snippetText(edit.find);
    const replace = snippetText(edit.replace);
    const what = `mutant ${mutantId}, edit ${index + 1} of ${edits.length}`;
    const hits = [...contents].flatMap(([file, text]) =>
      offsetsOf(text, find).map((offset) => ({ file, offset })),
    );
    if (hits.length === 0) {
      throw new MutantTableError(
        `${what}: its find snippet is in no file under ${folders.join(', ')} — the code it breaks changed; ` +
          `remake the edit against the new code (same bug). The snippet:\n${quoted(find)}`,
      );
    }
    if (hits.length > 1) {
      const where = hits.map((h) => `${h.file}:${lineOf(contents.get(h.file)!, h.offset)}`).join(', ');
      throw new MutantTableError(
        `${what}: its find snippet matches ${hits.length} times (${where}), it must match exactly once — ` +
          `add lines of the code around it until it names one place. The snippet:\n${quoted(find)}`,
      );
    }
    return { index, file: hits[0]!.file, offset: hits[0]!.offset, find, replace };
  });
  const byPlace = [...located].sort((a, b) => a.file.localeCompare(b.file) || a.offset - b.offset);
  for (let i = 1; i < byPlace.length; i++) {
    const [before, after] = [byPlace[i - 1]!, byPlace[i]!];
    if (before.file === after.file && before.offset + before.find.length > after.offset) {
      throw new MutantTableError(
        `mutant ${mutantId}: edits ${before.index + 1} and ${after.index + 1} overlap in ${after.file}; ` +
          'make them one edit',
      );
    }
  }
  return located;
}

/** The mutated content of each file the located edits touch (edits applied from the end, so offsets hold). */
export function applyEdits(
  located: readonly LocatedEdit[],
  original: ReadonlyMap<string, string>,
): Map<string, string> {
  const mutated = new Map<string, string>();
  const fromTheEnd = [...located].sort((a, b) => a.file.localeCompare(b.file) || b.offset - a.offset);
  for (const edit of fromTheEnd) {
    const text = mutated.get(edit.file) ?? original.get(edit.file);
    if (text === undefined) throw new Error(`no original content for ${edit.file}`);
    if (text.slice(edit.offset, edit.offset + edit.find.length) !== edit.find) {
      throw new Error(`edit ${edit.index + 1} no longer matches ${edit.file} at offset ${edit.offset}`);
    }
    mutated.set(
      edit.file,
      text.slice(0, edit.offset) + edit.replace + text.slice(edit.offset + edit.find.length),
    );
  }
  return mutated;
}

/**
 * The one test file named `name` (a file name, no folders) anywhere under test/<suite>/, relative to the root; a
 * MutantTableError when there is none or more than one.
 */
export function locateTest(root: string, mutantId: string, suite: Suite, name: string): string {
  const hits = filesUnder(root, `test/${suite}`).filter((file) => path.posix.basename(file) === name);
  if (hits.length === 1) return hits[0]!;
  throw new MutantTableError(
    hits.length === 0
      ? `mutant ${mutantId}: no killing test file ${name} under test/${suite}/ (was it renamed or deleted?)`
      : `mutant ${mutantId}: the killing test file ${name} is ambiguous under test/${suite}/: ${hits.join(', ')}`,
  );
}
