// The fencing peers in the report (bench/peers/): issue 37's target rows, fenced ÷ each peer at 64 and at 1,
// only for the peers that ran; the CPU table prints a peer's own server.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { BenchResults } from '../../../../bench/suite/results.js';
import { checkTargets, renderMarkdown } from '../../../../bench/suite/report.js';
import type { ThroughputCell } from '../../../../bench/suite/scenarios/throughput.js';

const RESULTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../bench/results');

/** latest.json with an etcd cell beside fenced's at every concurrency, at `cycles` per second. */
function withEtcd(cycles: Record<string, number>): BenchResults {
  const file = structuredClone(
    JSON.parse(readFileSync(path.join(RESULTS, 'latest.json'), 'utf8')) as BenchResults,
  );
  for (const [concurrency, cells] of Object.entries(file.results.throughput!.byConcurrency)) {
    const etcd: ThroughputCell = {
      ...cells.fenced!,
      median: cycles[concurrency]!,
      serverCpuUsPerCycle: 1_234,
      serverCpuOf: '3 etcd members',
    };
    cells.etcd = etcd;
  }
  return file;
}

describe('the fencing peers in the report', () => {
  it('checks fenced ÷ each peer that ran at 64 (≥ 4×) and at 1 (≥ 1×)', () => {
    const file = withEtcd({ '1': 1, '16': 1, '64': 1, '256': 1 });
    const fenced64 = file.results.throughput!.byConcurrency['64']!.fenced!.median;
    const fenced1 = file.results.throughput!.byConcurrency['1']!.fenced!.median;
    const met = checkTargets(withEtcd({ '1': fenced1, '16': 1, '64': fenced64 / 4 }));
    expect(met.find((c) => c.target === 'acquire+release throughput at concurrency 64 ≥ 4× etcd')?.met).toBe(
      true,
    );
    expect(met.find((c) => c.target === 'acquire+release throughput at concurrency 1 ≥ 1× etcd')?.met).toBe(
      true,
    );
    const missed = checkTargets(withEtcd({ '1': fenced1 * 2, '16': 1, '64': fenced64 / 3 }));
    expect(
      missed.find((c) => c.target === 'acquire+release throughput at concurrency 64 ≥ 4× etcd')?.met,
    ).toBe(false);
    expect(
      missed.find((c) => c.target === 'acquire+release throughput at concurrency 1 ≥ 1× etcd')?.met,
    ).toBe(false);
    // Peers that did not run have no row.
    expect(met.some((c) => c.target.endsWith('zookeeper'))).toBe(false);
  });

  it("prints a peer's own server CPU in the CPU table, with what it covers", () => {
    const markdown = renderMarkdown(withEtcd({ '1': 10, '16': 10, '64': 10, '256': 10 }));
    expect(markdown).toContain('/ 1,234 µs (3 etcd members)');
  });
});
