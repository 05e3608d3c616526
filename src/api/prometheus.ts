import type { FastifyInstance } from 'fastify';
import { ApiError } from '../core/errors.js';
import { err, type RouteSchema } from '../core/routeschema.js';
import { serviceMetrics } from '../metrics/prometheus.js';
import { decide } from '../policy/decide.js';
import type { ServiceContext } from '../store/service.js';
import { principalOf } from './objects.js';

/** The Prometheus path of the service: not /metrics, which is the Metric object collection. */
export const PROMETHEUS_PATH = '/prometheus';

/**
 * GET /prometheus: the Prometheus text exposition (docs/directory.md), for an admin or audit key
 * (Prometheus sends it as `authorization: credentials`). Every answered request is observed.
 */
export function registerPrometheusRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const metrics = serviceMetrics(ctx);
  app.answers.afterResponse((req, reply) => {
    metrics.observe(req.method, req.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
  });
  app.get(PROMETHEUS_PATH, { schema: GET_PROMETHEUS }, async (req, reply) => {
    if (!(await decide(ctx, principalOf(req), 'Metrics.read', { kind: 'Policy', id: '' })).Allowed)
      throw new ApiError('Forbidden', 'the Prometheus metrics need an admin or audit key');
    reply.header('Cache-Control', 'no-store');
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
}

// The route schemas: what Fastify checks and /openapi.json describes (src/api/openapi.ts).
const GET_PROMETHEUS: RouteSchema = {
  tags: ['Metric'],
  summary: 'Prometheus text exposition (admin, audit); not the Metric collection',
  response: {
    '200': {
      description: 'text/plain; version=0.0.4',
      content: { 'text/plain': { schema: { type: 'string' } } },
    },
    '403': err('Not admin or audit'),
  },
};
