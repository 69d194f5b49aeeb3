// The documentation's runnable code blocks (CONTRIBUTING.md, "Runnable examples"): a fenced block whose info
// string is `js runnable` or `ts runnable` claims to run as printed. `js` blocks run as `.mjs` files on plain
// Node, `ts` blocks as `.ts` files through tsx. Every other block is an excerpt and is not run.
import { readFileSync } from 'node:fs';

/** The Markdown files whose runnable blocks the docs test runs. */
export const DOCUMENTED_FILES = [
  'README.md',
  'packages/coordinator/README.md',
  'packages/guarded-store/README.md',
  'packages/shared/README.md',
  'packages/redlock/README.md',
] as const;

export interface RunnableBlock {
  /** The Markdown file, relative to the repository root. */
  file: string;
  /** The line of the opening fence (1-based). */
  line: number;
  language: 'js' | 'ts';
  code: string;
}

const OPENING = /^(\s*)(`{3,}|~{3,})\s*(\S+)?\s*(.*)$/;

/**
 * The runnable blocks of one Markdown text, in order. A block whose info string says `runnable` with a language
 * other than js or ts is an error (nothing would run it), as is a runnable block that is never closed.
 */
export function runnableBlocks(file: string, text: string): RunnableBlock[] {
  const lines = text.split('\n');
  const blocks: RunnableBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const opening = OPENING.exec(lines[i]!);
    if (opening === null) continue;
    const [, indent = '', fence = '', language = '', rest = ''] = opening;
    const closing = new RegExp(`^\\s*\\${fence[0]}{${fence.length},}\\s*$`);
    const closeAt = lines.findIndex((line, j) => j > i && closing.test(line));
    const runnable = rest.split(/\s+/).includes('runnable');
    if (runnable) {
      if (language !== 'js' && language !== 'ts') {
        throw new Error(
          `${file}:${i + 1}: a runnable block must be js or ts (given: ${JSON.stringify(language)})`,
        );
      }
      if (closeAt === -1) throw new Error(`${file}:${i + 1}: the runnable block is never closed`);
      const code = lines
        .slice(i + 1, closeAt)
        .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
        .join('\n');
      blocks.push({ file, line: i + 1, language, code: `${code}\n` });
    }
    if (closeAt === -1) break;
    i = closeAt;
  }
  return blocks;
}

/** The runnable blocks of every documented file under `root`. */
export function documentedRunnableBlocks(root: string): RunnableBlock[] {
  return DOCUMENTED_FILES.flatMap((file) => runnableBlocks(file, readFileSync(`${root}/${file}`, 'utf8')));
}
