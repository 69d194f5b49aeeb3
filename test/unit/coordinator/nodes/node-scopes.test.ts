import { describe, expect, it } from 'vitest';
import { NodeScopes } from '../../../../packages/coordinator/src/nodes/node-scopes.js';
import { nodeStateKeys, resourceKeys } from '../../../../packages/coordinator/src/keys/key-layout.js';
import { keySlot, SLOT_COUNT } from '../../../../packages/coordinator/src/keys/slots.js';

describe('NodeScopes', () => {
  it('a standalone node has one scope holding its own node-state keys', () => {
    const scopes = new NodeScopes('fenced', false);
    expect(scopes.count).toBe(1);
    const record = resourceKeys('fenced', 'acct:1').record;
    expect(scopes.of(record)).toBe(0);
    expect(scopes.keysOf(0)).toEqual(nodeStateKeys('fenced'));
  });

  it('a Cluster member keeps each slot’s node state in that slot', () => {
    const scopes = new NodeScopes('fenced', true);
    expect(scopes.count).toBe(SLOT_COUNT);
    const keys = resourceKeys('fenced', 'acct:1');
    const scope = scopes.of(keys.record);
    expect(scope).toBe(keySlot(keys.token));
    for (const key of Object.values(scopes.keysOf(scope)) as string[]) expect(keySlot(key)).toBe(scope);
  });

  it('counts initialized scopes: all, any, the empty ones and the voting ones', () => {
    const scopes = new NodeScopes('fenced', true);
    expect(scopes.any).toBe(false);
    scopes.setAll(true);
    expect(scopes.all).toBe(true);
    scopes.set(7, false);
    scopes.set(7, false); // twice: counted once
    expect(scopes.all).toBe(false);
    expect(scopes.any).toBe(true);
    expect(scopes.empty()).toEqual([7]);
    expect(scopes.voting()).toHaveLength(SLOT_COUNT - 1);
    scopes.set(7, true);
    expect(scopes.all).toBe(true);
    expect(scopes.votes(7)).toBe(true);
  });

  it('remembers a seal epoch per scope', () => {
    const scopes = new NodeScopes('fenced', true);
    scopes.sealed(3, 'e1');
    expect(scopes.epochOf(3)).toBe('e1');
    expect(scopes.epochOf(4)).toBe('');
  });

  it('names a scope as a node or as a slot of a member', () => {
    expect(new NodeScopes('fenced', false).describe(0, 'h:1')).toBe('node h:1');
    expect(new NodeScopes('fenced', true).describe(9, 'cluster(h:1)')).toBe('slot 9 of cluster(h:1)');
  });
});
