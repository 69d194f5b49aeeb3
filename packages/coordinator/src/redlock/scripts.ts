import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { ScriptName } from './script-results.js';

interface ScriptDefinition {
  /** The ioredis command name it is registered under (prefixed so it cannot clash with the caller's). */
  readonly command: string;
  readonly numberOfKeys: number;
}

export const SCRIPT_DEFINITIONS: { readonly [S in ScriptName]: ScriptDefinition } = {
  acquire: { command: 'fencedAcquire', numberOfKeys: 3 },
  promise: { command: 'fencedPromise', numberOfKeys: 3 },
  extend: { command: 'fencedExtend', numberOfKeys: 2 },
  release: { command: 'fencedRelease', numberOfKeys: 1 },
  inspect: { command: 'fencedInspect', numberOfKeys: 2 },
  'repair-token': { command: 'fencedRepairToken', numberOfKeys: 2 },
  'finish-repair': { command: 'fencedFinishRepair', numberOfKeys: 2 },
};

export const SCRIPT_NAMES = Object.keys(SCRIPT_DEFINITIONS) as ScriptName[];

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

let sources: Map<ScriptName, string> | undefined;

/** The Lua source of every script, includes expanded, read once. */
export function scriptSources(): ReadonlyMap<ScriptName, string> {
  sources ??= new Map(SCRIPT_NAMES.map((name) => [name, loadScriptSource(name)]));
  return sources;
}

/**
 * Registers every script on a client with `defineCommand`: ioredis then sends EVALSHA and falls back to EVAL
 * when the node answers NOSCRIPT (after a restart, for instance).
 */
export function defineScripts(client: Redis): void {
  for (const [name, lua] of scriptSources()) {
    const { command, numberOfKeys } = SCRIPT_DEFINITIONS[name];
    client.defineCommand(command, { numberOfKeys, lua });
  }
}

/** Runs a registered script; the reply is raw and must go through `interpretReply`. */
export function runScript(
  client: Redis,
  name: ScriptName,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  const { command, numberOfKeys } = SCRIPT_DEFINITIONS[name];
  if (keys.length !== numberOfKeys) {
    throw new Error(`${name} takes ${numberOfKeys} keys, got ${keys.length}`);
  }
  const fn: unknown = Reflect.get(client, command);
  if (typeof fn !== 'function') throw new Error(`script ${name} is not registered on this client`);
  return (fn as (...a: (string | number)[]) => Promise<unknown>).apply(client, [...keys, ...args]);
}
