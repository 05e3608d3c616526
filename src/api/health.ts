import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../store/context.js';
import { databaseDown, databaseUnavailable } from '../store/unavailable.js';

export function registerHealthRoutes(app: FastifyInstance, ctx: ServiceContext) {
  // 200 only when the database answers, so a load balancer drops a broken instance: while it does
  // not, 503 with Retry-After (within the pool's connect timeout: never a hang).
  app.get('/healthz', { config: { auth: 'none' } }, async (req, reply) => {
    try {
      await ctx.store.lastSeq();
    } catch (err) {
      if (!databaseUnavailable(err)) throw err;
      req.log.warn({ err }, 'health check: the database is unavailable');
      throw databaseDown();
    }
    return reply.type('application/json').send('{"Status":"ok"}');
  });
}
