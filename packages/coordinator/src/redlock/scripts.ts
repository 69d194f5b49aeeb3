import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { ScriptName } from './script-results.js';

/**
 * How many keys each script takes. `acquire` and `release` take a batch (see their contract blocks): the
 * number of keys follows from the batch size, so they have no fixed count.
 */
export const SCRIPT_KEY_COUNTS: { readonly [S in ScriptName]: number | 'batch' } = {
  acquire: 'batch',
  promise: 3,
  extend: 2,
  release: 'batch',
  inspect: 2,
  'repair-token': 2,
  'finish-repair': 2,
};

export const SCRIPT_NAMES = Object.keys(SCRIPT_KEY_COUNTS) as ScriptName[];

/** `lua/` sits next to both `src/` and `dist/`, two levels above this file in either. */
export function scriptUrl(name: ScriptName): URL {
  return new URL(`../../lua/${name}.lua`, import.meta.url);
}

const INCLUDE = /^-- @include ([a-z][a-z0-9-]*)$/gm;

/**
 * A script's source with each `-- @include NAME` line replaced by `lua/include/NAME.lua`: Redis scripts cannot
 * share code, so helpers such as the decimal token comparison live in one file and are inlined at load time.
 */
export function loadScriptSource(name: ScriptName): string {
  return readFileSync(scriptUrl(name), 'utf8').replace(INCLUDE, (_line, include: string) =>
    readFileSync(new URL(`../../lua/include/${include}.lua`, import.meta.url), 'utf8').trimEnd(),
  );
}

interface LoadedScript {
  readonly source: string;
  /** SHA1 of the source: the name EVALSHA runs it by once the node has it cached. */
  readonly sha: string;
}

let loaded: Map<ScriptName, LoadedScript> | undefined;

/** Every script's source (includes expanded) and SHA1, read once. */
function scripts(): ReadonlyMap<ScriptName, LoadedScript> {
  loaded ??= new Map(
    SCRIPT_NAMES.map((name) => {
      const source = loadScriptSource(name);
      return [name, { source, sha: createHash('sha1').update(source).digest('hex') }];
    }),
  );
  return loaded;
}

/**
 * Runs a script by its SHA1 (EVALSHA); when the node does not have it cached (NOSCRIPT: first use, or a
 * restart) it runs the source with EVAL, which also caches it for the next call. The reply is raw and must go
 * through `interpretReply` (or `splitBatchReply` for the batch scripts).
 */
export async function runScript(
  client: Redis,
  name: ScriptName,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  const expected = SCRIPT_KEY_COUNTS[name];
  if (expected === 'batch' ? keys.length === 0 : keys.length !== expected) {
    throw new Error(
      `${name} takes ${expected === 'batch' ? 'at least one' : expected} keys, got ${keys.length}`,
    );
  }
  const script = scripts().get(name)!;
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return client.eval(script.source, keys.length, ...keys, ...args);
  }
}
