import type { FastifyInstance } from 'fastify';
import { err, jsonObject, type RouteSchema } from '../core/routeschema.js';
import type { ServiceContext } from '../store/service.js';

export function registerHealthRoutes(app: FastifyInstance, ctx: ServiceContext) {
  // 200 only when the database answers, so a load balancer drops a broken instance: while it does
  // not, the error handler answers 503 with Retry-After (src/store/unavailable.ts), within the
  // pool's connect timeout, never a hang.
  app.get('/healthz', { config: { auth: 'none' }, schema: HEALTH }, async (_req, reply) => {
    await ctx.store.lastSeq();
    return reply.type('application/json').send('{"Status":"ok"}');
  });
}

const HEALTH: RouteSchema = {
  tags: ['Service'],
  summary: 'Is this instance serving (its database answers)? For load balancers',
  security: [],
  response: {
    200: jsonObject('Serving', { Status: { type: 'string', enum: ['ok'] } }),
    503: err('The database does not answer (Retry-After)'),
  },
};
