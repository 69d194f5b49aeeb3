import { ErrorCode } from '@fenced/shared';
import { Router } from 'express';
import type { LeaseService, NodeStatusView } from './lease-service.js';
import type { ServiceMetrics } from './service-metrics.js';

/** `/healthz` (liveness: no Redis calls), `/readyz` (a quorum of voting nodes) and `/metrics`. */
export function healthRoutes(coordinator: LeaseService, metrics: ServiceMetrics): Router {
  const router = Router();

  router.get('/healthz', (_req, res) => {
    res.status(200).json({ status: 'ok' });
  });

  router.get('/readyz', async (_req, res) => {
    const nodes = (await coordinator.nodeStatus()).map(publicNodeStatus);
    const votingNodes = nodes.filter((n) => n.voting).length;
    const ready = votingNodes >= coordinator.quorum;
    res.status(ready ? 200 : 503).json({
      ready,
      quorum: coordinator.quorum,
      nodeCount: coordinator.nodeCount,
      votingNodes,
      nodes,
      ...(ready
        ? {}
        : {
            error: {
              code: ErrorCode.QUORUM_UNAVAILABLE,
              message: `${votingNodes} of ${coordinator.nodeCount} Redis nodes can vote; a quorum needs ${coordinator.quorum}`,
            },
          }),
    });
  });

  router.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });

  return router;
}

/** Only the documented fields, so nothing the coordinator adds later leaks out unreviewed. */
function publicNodeStatus(status: NodeStatusView): NodeStatusView {
  return {
    node: status.node,
    address: status.address,
    reachable: status.reachable,
    ...(status.role !== undefined ? { role: status.role } : {}),
    configOk: status.configOk,
    problems: [...status.problems],
    voting: status.voting,
    ...(status.latencyMs !== undefined ? { latencyMs: Math.round(status.latencyMs * 100) / 100 } : {}),
  };
}
