import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { History, operations, toJson } from '@fenced/test-utils/history';

function fakeClock(): () => number {
  let t = 0;
  return () => (t += 10);
}

describe('History', () => {
  it('records an invoke and its completion with the same call id and monotonic times', () => {
    const history = new History({ now: fakeClock() });
    const call = history.invoke('p1', 'acquire', 'r');
    call.ok({ token: 3n, leaseId: 'a' });
    expect(history.events).toEqual([
      { kind: 'invoke', process: 'p1', op: 'acquire', resource: 'r', t: 10, call: 1 },
      { kind: 'ok', process: 'p1', op: 'acquire', resource: 'r', t: 20, call: 1, token: 3n, leaseId: 'a' },
    ]);
    expect(() => call.fail()).toThrow(/completed twice/);
  });

  it('runs an operation: ok with its description, unknown on error unless classified as a failure', async () => {
    const history = new History({ now: fakeClock() });
    await history.run(
      'p1',
      'write',
      'r',
      () => Promise.resolve(5),
      (v) => ({ value: v }),
      { fields: { token: 2n } },
    );
    await expect(
      history.run('p1', 'write', 'r', () => Promise.reject(new Error('timeout'))),
    ).rejects.toThrow();
    const stale = Object.assign(new Error('stale'), { code: 'STALE_TOKEN' });
    await expect(
      history.run('p2', 'write', 'r', () => Promise.reject(stale), undefined, { classify: () => 'fail' }),
    ).rejects.toBe(stale);

    const ops = operations(history.data);
    expect(ops.map((o) => [o.process, o.outcome, o.value, o.error])).toEqual([
      ['p1', 'ok', 5, undefined],
      ['p1', 'unknown', undefined, 'timeout'],
      ['p2', 'fail', undefined, 'STALE_TOKEN: stale'],
    ]);
    expect(ops[0]).toMatchObject({ token: 2n, invokedAt: 10, completedAt: 20 });
  });

  it('pairs hand-made events per process, and treats an invoke without completion as unknown', () => {
    const ops = operations({
      events: [
        { kind: 'invoke', process: 'p1', op: 'acquire', resource: 'r', t: 1 },
        { kind: 'invoke', process: 'p2', op: 'acquire', resource: 'r', t: 2 },
        { kind: 'ok', process: 'p1', op: 'acquire', resource: 'r', t: 3, token: 1n },
        { kind: 'fail', process: 'p3', op: 'release', resource: 'r', t: 4 },
      ],
      commits: [],
    });
    expect(ops.map((o) => [o.process, o.outcome, o.invokedAt, o.completedAt])).toEqual([
      ['p1', 'ok', 1, 3],
      ['p2', 'unknown', 2, Infinity],
      ['p3', 'fail', 4, 4],
    ]);
  });

  it('dumps as JSON with tokens as decimal strings', async () => {
    const history = new History({ now: fakeClock() });
    history.invoke('p1', 'acquire', 'r').ok({ token: 2n ** 63n - 1n });
    history.commit({ resource: 'r', token: 9_007_199_254_740_993n });
    expect(toJson(history)).toContain('"token": "9223372036854775807"');
    const file = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-history-')), 'h.json');
    try {
      await history.dump(file);
      expect(JSON.parse(await fs.readFile(file, 'utf8'))).toMatchObject({
        commits: [{ token: '9007199254740993' }],
      });
    } finally {
      await fs.rm(path.dirname(file), { recursive: true, force: true });
    }
  });
});
