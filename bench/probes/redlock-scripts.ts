// node-redlock 5's own Lua scripts, read from its installed package (it does not export them), for the stand-alone
// measurements that send them to a node directly (script-instructions.ts, acquire-path.ts).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** node-redlock 5's ACQUIRE_SCRIPT and RELEASE_SCRIPT, as its installed package defines them. */
export function redlockSources(): { acquire: string; release: string } {
  const file = createRequire(import.meta.url).resolve('redlock');
  const text = readFileSync(file, 'utf8');
  const constant = (name: string): string => {
    const match = new RegExp(`const ${name} = \`([^\`]*)\``).exec(text);
    if (match === null) throw new Error(`${name} not found in ${file}: the installed redlock changed`);
    return match[1]!;
  };
  return { acquire: constant('ACQUIRE_SCRIPT'), release: constant('RELEASE_SCRIPT') };
}
