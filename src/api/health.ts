import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../store/context.js';

export function registerHealthRoutes(app: FastifyInstance, ctx: ServiceContext) {
  // Answers 200 only when the database answers, so a load balancer drops a broken instance.
  app.get('/healthz', { config: { auth: 'none' } }, async (_req, reply) => {
    await ctx.store.lastSeq();
    return reply.type('application/json').send('{"Status":"ok"}');
  });
}
