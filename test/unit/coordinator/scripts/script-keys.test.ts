// Each script's KEYS as packages/coordinator/src/scripts/script-keys.ts builds them, held against the contract block at the head of the
// script's Lua file: every `KEYS[n] <role>` the block names must be the key of that role at position n. A script
// whose key order changes in one place and not the other fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  freshMarkKey,
  nodeStateKeys,
  resourceKeys,
  type NodeStateKeys,
  type ResourceKeys,
} from '../../../../packages/coordinator/src/keys/key-layout.js';
import { repairRaiseCall, scriptKeys } from '../../../../packages/coordinator/src/scripts/script-keys.js';
import type { ScriptName } from '../../../../packages/coordinator/src/scripts/script-results.js';
import { scriptUrl } from '../../../../packages/coordinator/src/scripts/scripts.js';

const NONCE = 'n1';
const ROLES = [
  'incarnation key',
  'repair marker',
  'floor',
  'seal epoch',
  'settings',
  'fold lock',
  'init mark',
  'lease key',
  'lease record',
  'token register',
] as const;
type Role = (typeof ROLES)[number];

function roleKey(role: Role, k: NodeStateKeys, r: ResourceKeys): string {
  switch (role) {
    case 'incarnation key':
      return k.incarnation;
    case 'repair marker':
      return k.repair;
    case 'floor':
      return k.floor;
    case 'seal epoch':
      return k.seal;
    case 'settings':
      return k.settings;
    case 'fold lock':
      return k.fold;
    case 'init mark':
      return freshMarkKey(k.fresh, NONCE);
    case 'lease key':
      return r.lease;
    case 'lease record':
      return r.record;
    case 'token register':
      return r.token;
  }
}

/** Positions written as formulas in the contracts, with one item (i = j = 1) and one register (r = 1). */
const FORMULAS: Record<string, number> = {
  '3i+2': 5,
  '3i+3': 6,
  '3i+4': 7,
  '2i-1': 1,
  '2i': 2,
  '2+i': 3,
  '1+r+2j': 4,
  '2+r+2j': 5,
};

const r = resourceKeys('fenced', 'acct:1');
const standalone = nodeStateKeys('fenced');
const slot = nodeStateKeys('fenced', 7);

const BUILT: Partial<Record<ScriptName, { keys: string[]; k: NodeStateKeys }>> = {
  acquire: { keys: [...scriptKeys.acquire(standalone), ...scriptKeys.acquireItem(r)], k: standalone },
  release: { keys: scriptKeys.releaseItem(r), k: standalone },
  promise: { keys: scriptKeys.promise(standalone, r), k: standalone },
  extend: { keys: scriptKeys.extend(standalone, r), k: standalone },
  inspect: { keys: scriptKeys.inspect(standalone, r), k: standalone },
  'repair-marker': { keys: scriptKeys['repair-marker'](standalone), k: standalone },
  'repair-read': { keys: scriptKeys['repair-read'](standalone), k: standalone },
  'repair-read-slot': { keys: scriptKeys['repair-read'](slot), k: slot },
  'repair-raise': {
    keys: repairRaiseCall(standalone, 'fenced', 'repair-1', 5n, [[r.token, 5n]], [[r.record, 'l|5', 100]])
      .keys,
    k: standalone,
  },
  'finish-repair': { keys: scriptKeys['finish-repair'](standalone), k: standalone },
  settings: { keys: scriptKeys.settings(standalone), k: standalone },
  'fresh-init': { keys: scriptKeys['fresh-init'](standalone, NONCE), k: standalone },
  fold: { keys: scriptKeys.fold(standalone), k: standalone },
  'fold-slot': { keys: scriptKeys['fold-slot'](slot, [r.token]), k: slot },
};

/** Every `KEYS[n] <role>` a script's contract block names, with n evaluated. */
function contract(name: ScriptName): [number, Role][] {
  const lua = readFileSync(scriptUrl(name), 'utf8');
  const head = lua.slice(0, lua.search(/^(?!--)/m));
  const named: [number, Role][] = [];
  const pattern = new RegExp(`KEYS\\[([0-9a-z+-]+)\\]\\s+(?:its )?(${ROLES.join('|')})`, 'g');
  for (const [, position, role] of head.matchAll(pattern)) {
    const n = /^\d+$/.test(position!) ? Number(position) : FORMULAS[position!];
    if (n === undefined) throw new Error(`${name}: no value for KEYS[${position}]`);
    named.push([n, role as Role]);
  }
  return named;
}

describe('script keys', () => {
  for (const [name, built] of Object.entries(BUILT) as [ScriptName, { keys: string[]; k: NodeStateKeys }][]) {
    it(`${name}: the keys built are the ones its contract names, in its order`, () => {
      const named = contract(name);
      expect(named.length, `${name} names its KEYS`).toBeGreaterThan(0);
      for (const [n, role] of named) {
        expect(built.keys[n - 1], `${name} KEYS[${n}] (${role})`).toBe(roleKey(role, built.k, r));
      }
      expect(built.keys.length, `${name}: no key the contract does not name`).toBe(
        Math.max(...named.map(([n]) => n)),
      );
    });
  }
});
