// The Grafana dashboard in docs/ cannot drift from the service: every metric it queries must exist in the registry
// the service fills (its own metrics, the node gauges, and the process metrics server.ts adds).
import { readFileSync } from 'node:fs';
import { EventEmitter } from 'node:events';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createApp, type LeaseService } from '../../../packages/service/src/index.js';

interface Panel {
  title?: string;
  type: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

const dashboard = JSON.parse(
  readFileSync(new URL('../../../docs/grafana-dashboard.json', import.meta.url), 'utf8'),
) as { panels: Panel[]; templating: { list: { query?: unknown; definition?: string }[] } };

/** Every query of the dashboard: panel targets (rows included) and template variable queries. */
function queries(): { where: string; expr: string }[] {
  const found: { where: string; expr: string }[] = [];
  const walk = (panels: readonly Panel[]): void => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) {
        if (target.expr !== undefined) found.push({ where: `panel "${panel.title}"`, expr: target.expr });
      }
      walk(panel.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const variable of dashboard.templating.list) {
    if (variable.definition !== undefined)
      found.push({ where: 'a template variable', expr: variable.definition });
  }
  return found;
}

/** The names a registry exposes, with the series a histogram adds. */
async function serviceMetricNames(): Promise<Set<string>> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const coordinator = Object.assign(new EventEmitter(), {
    quorum: 2,
    nodeCount: 3,
    nodeStatus: () => Promise.resolve([]),
  }) as unknown as LeaseService;
  createApp({ coordinator, registry });
  const names = new Set<string>();
  for (const metric of await registry.getMetricsAsJSON()) {
    names.add(metric.name);
    // prom-client's types declare a numeric enum, but the JSON carries the type's name.
    if (String(metric.type) === 'histogram') {
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
    }
  }
  return names;
}

const METRIC_NAME = /\b(?:fenced|process|nodejs)_[a-z0-9_]+\b/g;

describe('docs/grafana-dashboard.json', () => {
  it('queries only metrics the service exposes', async () => {
    const known = await serviceMetricNames();
    const missing: string[] = [];
    for (const { where, expr } of queries()) {
      const names = expr.match(METRIC_NAME) ?? [];
      if (names.length === 0) missing.push(`${where} queries no fenced metric: ${expr}`);
      for (const name of names) if (!known.has(name)) missing.push(`${where}: ${name}`);
    }
    expect(missing).toEqual([]);
  });

  it('shows grants, denials, operation latency, node errors and every node gauge', () => {
    const all = queries()
      .map((q) => q.expr)
      .join('\n');
    for (const name of [
      'fenced_lease_grants_total',
      'fenced_lease_denials_total',
      'fenced_operation_duration_seconds_bucket',
      'fenced_node_errors_total',
      'fenced_node_up',
      'fenced_node_voting',
      'fenced_node_repairing',
      'fenced_node_repair_registers_copied',
      'fenced_voting_nodes',
      'fenced_quorum',
    ]) {
      expect(all).toContain(name);
    }
  });

  it('has unique panel ids, and every panel a title and a place on the grid', () => {
    const ids = new Set<number>();
    for (const panel of dashboard.panels as (Panel & { id: number; gridPos?: unknown })[]) {
      expect(ids.has(panel.id)).toBe(false);
      ids.add(panel.id);
      expect(panel.title).toBeTruthy();
      expect(panel.gridPos).toBeDefined();
    }
  });
});
