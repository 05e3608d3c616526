import type { FastifyInstance } from 'fastify';
import { ApiError } from '../core/errors.js';
import { enforce } from '../policy/decide.js';
import { actionList, explainAction } from '../policy/explain.js';
import type { ServiceContext } from '../store/context.js';
import { principalOf } from './objects.js';

type ExplainQuery = {
  actor?: string;
  action?: string;
  kind?: string;
  id?: string;
  user?: string;
  app?: string;
};

const one = (v: unknown, name: string): string | undefined => {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length > 256)
    throw new ApiError('InvalidField', `give ${name} once, at most 256 characters`, { field: name });
  return v;
};

/**
 * The decision point's own endpoints, for administrators (docs/security.md, "Asking why"):
 * GET /policy/explain answers why a decision is what it is, GET /policy/actions lists the actions.
 */
export function registerPolicyRoutes(app: FastifyInstance, ctx: ServiceContext) {
  app.get<{ Querystring: ExplainQuery }>('/policy/explain', async (req, reply) => {
    await enforce(ctx, principalOf(req), 'Policy.explain', { kind: 'Policy', id: '' });
    const q = req.query;
    const actor = one(q.actor, 'actor');
    const action = one(q.action, 'action');
    reply.header('Cache-Control', 'no-store');
    if (actor !== undefined && action !== undefined) {
      const kind = one(q.kind, 'kind');
      const id = one(q.id, 'id');
      return explainAction(ctx, { actor, action, ...(kind ? { kind } : {}), ...(id ? { id } : {}) });
    }
    throw new ApiError('BadRequest', 'give actor and action (with kind and id), or user and app', {
      field: 'actor',
    });
  });

  app.get('/policy/actions', async (req, reply) => {
    await enforce(ctx, principalOf(req), 'Policy.explain', { kind: 'Policy', id: '' });
    reply.header('Cache-Control', 'private, max-age=0');
    return actionList();
  });
}
