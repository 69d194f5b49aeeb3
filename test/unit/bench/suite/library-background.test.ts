// The scale scenario measures each library's passes with every other library's background work stopped
// (bench/suite/scenarios/scale.ts onlyBackgroundOf): fenced's coordinators fold in the background, and a fold pass SCANs
// every key of every node, the other libraries' too. These pin the switching itself; `npm run bench -- --quick
// --scenario scale` runs it against real nodes.
import { describe, expect, it } from 'vitest';
import { reopeningBackground, type LockLibrary } from '../../../../bench/suite/lock-library.js';
import { onlyBackgroundOf } from '../../../../bench/suite/scenarios/scale.js';

describe('reopeningBackground', () => {
  it('closes once on stop and opens once on start, however often either is called', async () => {
    const calls: string[] = [];
    const background = reopeningBackground(
      () => (calls.push('open'), Promise.resolve()),
      () => (calls.push('close'), Promise.resolve()),
    );
    await background.start(); // running from the start: nothing to open
    await background.stop();
    await background.stop();
    await background.start();
    await background.start();
    expect(calls).toEqual(['close', 'open']);
  });

  it('stays stopped when opening again fails, so the next start tries again', async () => {
    let fail = true;
    const calls: string[] = [];
    const background = reopeningBackground(
      () => (calls.push('open'), fail ? Promise.reject(new Error('nodes unreachable')) : Promise.resolve()),
      () => (calls.push('close'), Promise.resolve()),
    );
    await background.stop();
    await expect(background.start()).rejects.toThrow('nodes unreachable');
    fail = false;
    await background.start();
    expect(calls).toEqual(['close', 'open', 'open']);
  });
});

describe('onlyBackgroundOf', () => {
  /** Libraries whose background is a flag, and a log of every switch. */
  function libraries(names: readonly string[]): {
    all: LockLibrary[];
    running: Map<string, boolean>;
    log: string[];
  } {
    const running = new Map(names.map((n) => [n, true]));
    const log: string[] = [];
    const all = names.map((name) => {
      const background = reopeningBackground(
        () => (log.push(`start ${name}`), running.set(name, true), Promise.resolve()),
        () => (log.push(`stop ${name}`), running.set(name, false), Promise.resolve()),
      );
      return { name, background } as unknown as LockLibrary;
    });
    // A library without background work (redlock, the floor) is left alone.
    all.push({ name: 'redlock' } as unknown as LockLibrary);
    return { all, running, log };
  }

  it("leaves only the measured library's background running, and stops the others' before starting its own", async () => {
    const { all, running, log } = libraries(['fenced', 'fenced@abc1234']);
    await onlyBackgroundOf(all[0]!, all);
    expect([...running]).toEqual([
      ['fenced', true],
      ['fenced@abc1234', false],
    ]);
    await onlyBackgroundOf(all[2]!, all); // redlock's pass: nobody's background runs
    expect([...running.values()]).toEqual([false, false]);
    await onlyBackgroundOf(all[1]!, all);
    expect([...running]).toEqual([
      ['fenced', false],
      ['fenced@abc1234', true],
    ]);
    expect(log).toEqual(['stop fenced@abc1234', 'stop fenced', 'start fenced@abc1234']);
  });
});
