import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../store/context.js';

export function registerHealthRoutes(app: FastifyInstance, ctx: ServiceContext) {
  // 200 only when the database answers, so a load balancer drops a broken instance: while it does
  // not, the error handler answers 503 with Retry-After (src/store/unavailable.ts), within the
  // pool's connect timeout, never a hang.
  app.get('/healthz', { config: { auth: 'none' } }, async (_req, reply) => {
    await ctx.store.lastSeq();
    return reply.type('application/json').send('{"Status":"ok"}');
  });
}
