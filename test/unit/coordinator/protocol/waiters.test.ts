// Who a release wakes (protocol/waiters.ts), through the notifier's own dispatch: a release this process makes
// (`released`) goes the same way as the nodes' messages. No nodes: the subscriptions wait for no confirmation.
import { describe, expect, it } from 'vitest';
import { ReleaseNotifier } from '../../../../packages/coordinator/src/protocol/waiters.js';

const notifier = (): ReleaseNotifier => new ReleaseNotifier([], 1_000, () => undefined);

describe('a release', () => {
  it('wakes the longest-waiting waiter, one per release', async () => {
    const n = notifier();
    const first = await n.subscribe('channel', 0, 'lease-a');
    const second = await n.subscribe('channel', 0, 'lease-b');
    n.released('channel', 'lease-held');
    expect(await first.wait(0, undefined)).toBe(true);
    expect(await second.wait(0, undefined)).toBe(false);
    await n.close();
  });

  it("of a waiter's own lease (the undo of its failed round) goes to the next waiter, not to it", async () => {
    const n = notifier();
    const own = await n.subscribe('channel', 0, 'lease-a');
    const other = await n.subscribe('channel', 0, 'lease-b');
    n.released('channel', 'lease-a');
    expect(await own.wait(0, undefined)).toBe(false);
    expect(await other.wait(0, undefined)).toBe(true);
    // The other nodes' messages for the same release go to the same waiter.
    n.released('channel', 'lease-a');
    expect(await own.wait(0, undefined)).toBe(false);
    expect(await other.wait(0, undefined)).toBe(true);
    await n.close();
  });

  it('of its own lease wakes nobody when the waiter is alone, and a later release still wakes it', async () => {
    const n = notifier();
    const own = await n.subscribe('channel', 0, 'lease-a');
    n.released('channel', 'lease-a');
    expect(await own.wait(0, undefined)).toBe(false);
    n.released('channel', 'lease-held');
    expect(await own.wait(0, undefined)).toBe(true);
    await n.close();
  });

  it('handed to a waiter that leaves without the lease passes to the next one that is not its owner', async () => {
    const n = notifier();
    const leaving = await n.subscribe('channel', 0, 'lease-a');
    const owner = await n.subscribe('channel', 0, 'lease-held');
    const next = await n.subscribe('channel', 0, 'lease-c');
    n.released('channel', 'lease-held');
    leaving.close(false);
    expect(await owner.wait(0, undefined)).toBe(false);
    expect(await next.wait(0, undefined)).toBe(true);
    await n.close();
  });
});
