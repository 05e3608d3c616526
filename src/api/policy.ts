import type { FastifyInstance } from 'fastify';
import { ApiError } from '../core/errors.js';
import type { RouteSchema } from '../core/routeschema.js';
import { enforce } from '../policy/decide.js';
import { actionList, explainAction, explainAppUse } from '../policy/explain.js';
import type { ServiceContext } from '../store/service.js';
import { principalOf } from './objects.js';

type ExplainQuery = {
  actor?: string;
  action?: string;
  kind?: string;
  id?: string;
  user?: string;
  app?: string;
  level?: string;
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
  app.get<{ Querystring: ExplainQuery }>(
    '/policy/explain',
    { schema: GET_POLICY_EXPLAIN },
    async (req, reply) => {
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
      const user = one(q.user, 'user');
      const appId = one(q.app, 'app');
      if (user !== undefined && appId !== undefined) {
        const raw = one(q.level, 'level');
        const level = raw === undefined ? undefined : Number(raw);
        if (level !== undefined && !(Number.isInteger(level) && level >= 0 && level <= 4))
          throw new ApiError('InvalidField', 'level must be a whole number from 0 to 4', { field: 'level' });
        return explainAppUse(ctx, { user, app: appId, ...(level !== undefined ? { level } : {}) });
      }
      throw new ApiError('BadRequest', 'give actor and action (with kind and id), or user and app', {
        field: 'actor',
      });
    },
  );

  app.get('/policy/actions', { schema: GET_POLICY_ACTIONS }, async (req, reply) => {
    await enforce(ctx, principalOf(req), 'Policy.explain', { kind: 'Policy', id: '' });
    reply.header('Cache-Control', 'private, max-age=0');
    return actionList();
  });
}

// The route schemas: what Fastify checks and /openapi.json describes (src/api/openapi.ts).
const GET_POLICY_EXPLAIN: RouteSchema = {
  tags: ['Policy'],
  summary: 'Why the decision point decides as it does (admin only; docs/security.md, "Asking why")',
  querystring: {
    type: 'object',
    properties: {
      actor: { description: 'A user ID or an API key ID (with action)', type: 'string' },
      action: { description: 'An action of GET /policy/actions', type: 'string' },
      kind: { description: "The object type acted on (default: the action's)", type: 'string' },
      id: { description: 'The object acted on; memberships as <GroupID>.<UserID>', type: 'string' },
      user: { description: 'A user ID (with app): may this user use this App', type: 'string' },
      app: { description: 'An App ID (with user)', type: 'string' },
      level: {
        description: 'With user and app: the session integrity level to judge at (0 to 4)',
        type: 'string',
      },
    },
  },
  response: {
    '200': {
      description:
        'The decision: Allowed, Rule, Reason, Chain (each step Rule, Allowed, Reason), Actor, Action',
    },
    '400': { description: 'Unknown action, or neither actor and action nor user and app' },
    '403': { description: 'Not an administrator' },
    '404': { description: 'No such actor, user or object' },
  },
  // handler: only an administrator may ask (403 first); a schema would answer a bad query 400 before that.
  validatedBy: 'handler',
};

const GET_POLICY_ACTIONS: RouteSchema = {
  tags: ['Policy'],
  summary: 'Every action of the decision point: Action, Description, Effect, Target, Rules (admin only)',
  response: { '200': { description: 'A JSON array' }, '403': { description: 'Not an administrator' } },
};
