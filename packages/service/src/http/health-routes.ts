import { ErrorCode } from '@fenced/shared';
import type { FastifyInstance } from 'fastify';
import type { LeaseService, NodeStatusView } from './lease-service.js';
import type { ServiceMetrics } from './service-metrics.js';

/** `/healthz` (liveness: no Redis calls), `/readyz` (a quorum of voting nodes) and `/metrics`, added to `app`. */
export function healthRoutes(app: FastifyInstance, coordinator: LeaseService, metrics: ServiceMetrics): void {
  app.get('/healthz', (_request, reply) => {
    void reply.code(200).send({ status: 'ok' });
  });

  app.get('/readyz', async (_request, reply) => {
    const nodes = (await coordinator.nodeStatus()).map(publicNodeStatus);
    const votingNodes = nodes.filter((n) => n.voting).length;
    const ready = votingNodes >= coordinator.quorum;
    return reply.code(ready ? 200 : 503).send({
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

  app.get('/metrics', async (_request, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
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
