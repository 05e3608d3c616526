// Why ~300 lines: the directory's endpoints (accounts, changes and plans, agents, users' disable
// and merge) share the role and body helpers; each handler is a few lines over src/directory/.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../auth/principal.js';
import { ApiError } from '../core/errors.js';
import { heartbeat } from '../directory/agents.js';
import {
  CLAIM_MAX,
  claimChanges,
  LEASE_DEFAULT_S,
  LEASE_MAX_S,
  LEASE_MIN_S,
  reportChange,
  transitionChange,
  transitionPlan,
} from '../directory/changes.js';
import { disableUser } from '../directory/disable.js';
import { mergeUsers } from '../directory/merge.js';
import { suggestMerges } from '../directory/mergesuggest.js';
import { fetchInitialPassword } from '../directory/passwords.js';
import { planAccountChanges } from '../directory/plans.js';
import { allOf } from '../directory/queries.js';
import { refinedAccountSuggestions, refinedMergeSuggestions } from '../directory/refine.js';
import type { ChangeRole } from '../directory/states.js';
import { suggestAccountChanges } from '../directory/suggest.js';
import { Account } from '../objects/account.js';
import { User } from '../objects/user.js';
import { decide, enforce } from '../policy/decide.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import {
  CHANGE_TRANSITIONS,
  GET_ACCOUNTS_ID_PASSWORD,
  GET_USERS_MERGE,
  PLAN_TRANSITIONS,
  POST_ACCOUNTCHANGES_CLAIM,
  POST_ACCOUNTCHANGES_ID_RESULT,
  POST_ACCOUNTS_ID_PASSWORD,
  POST_USERS_ID_ACCOUNTS_SUGGEST,
  POST_USERS_ID_DISABLE,
  POST_USERS_ID_MERGE,
  transitionSchema,
} from './directoryschemas.js';
import { principalOf } from './objects.js';
import { proxyTokenFirst } from './proxytoken.js';

type IdParams = { id: string };

/** A JSON object body with only the `allowed` fields, each of the given JS type; {} when absent. */
function jsonFields(req: FastifyRequest, allowed: Record<string, 'string' | 'number' | 'object'>): Doc {
  const b = req.body;
  if (b === undefined || b === null || b === '') return {};
  if (typeof b !== 'object' || Array.isArray(b))
    throw new ApiError('InvalidJSON', 'the body must be a JSON object');
  for (const [k, v] of Object.entries(b)) {
    const want = allowed[k];
    if (!want) throw new ApiError('UnknownField', `${k} is not a field of this request`, { field: k });
    if (v !== null && (typeof v !== want || (want === 'object' && Array.isArray(v))))
      throw new ApiError('InvalidField', `${k} must be a ${want}`, { field: k });
  }
  return b as Doc;
}

/** admin or sync, for the lifecycle tables; 403 for anything else. */
function roleOf(p: Principal, allowed: readonly ('admin' | 'sync')[]): ChangeRole {
  if (p.scopes.has('admin')) return 'admin';
  if (allowed.includes('sync') && p.scopes.has('sync')) return 'sync';
  throw new ApiError('Forbidden', `this needs ${allowed.join(' or ')} scope`);
}

const agentOpen = { config: { auth: 'none' as const } };

/** Accounts, account changes and plans, provisioning agents, and the user operations of #16. */
export function registerDirectoryRoutes(app: FastifyInstance, ctx: ServiceContext) {
  registerLifecycleRoutes(app, ctx);
  registerAgentRoutes(app, ctx);
  registerPasswordRoutes(app, ctx);
  registerUserOperations(app, ctx);
}

/** Approve, cancel and retry of plans and changes: the lifecycle tables (src/directory/states.ts). */
function registerLifecycleRoutes(app: FastifyInstance, ctx: ServiceContext) {
  for (const op of ['approve', 'cancel'] as const) {
    const schema = transitionSchema('AccountChangePlan', PLAN_TRANSITIONS[op]);
    app.post<{ Params: IdParams }>(`/accountchangeplans/:id/${op}`, { schema }, async (req) => {
      const p = principalOf(req);
      const role = roleOf(p, op === 'approve' ? ['admin'] : ['admin', 'sync']);
      return transitionPlan(ctx, req.params.id, op, role, p.userId);
    });
  }
  for (const op of ['approve', 'cancel', 'retry'] as const) {
    const schema = transitionSchema('AccountChange', CHANGE_TRANSITIONS[op]);
    app.post<{ Params: IdParams }>(`/accountchanges/:id/${op}`, { schema }, async (req) => {
      const p = principalOf(req);
      const role = roleOf(p, op === 'approve' ? ['admin'] : ['admin', 'sync']);
      return transitionChange(ctx, req.params.id, op, role, p.userId);
    });
  }
}

/** A provisioning agent claims changes and reports results, with its App's proxy token. */
function registerAgentRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const { store } = ctx;
  // The token before the schema: without a valid one, 401 whatever the body.
  const { preValidation, appOf } = proxyTokenFirst(ctx);
  app.post(
    '/accountchanges/claim',
    { ...agentOpen, preValidation, schema: POST_ACCOUNTCHANGES_CLAIM },
    async (req, reply) => {
      const target = appOf(req);
      const b = jsonFields(req, { Name: 'string', Version: 'string', Max: 'number', LeaseSeconds: 'number' });
      const max = b.Max === undefined || b.Max === null ? 10 : Number(b.Max);
      const lease =
        b.LeaseSeconds === undefined || b.LeaseSeconds === null ? LEASE_DEFAULT_S : Number(b.LeaseSeconds);
      if (!Number.isInteger(max) || max < 1 || max > CLAIM_MAX)
        throw new ApiError('InvalidField', `Max must be a whole number from 1 to ${CLAIM_MAX}`, {
          field: 'Max',
        });
      if (!Number.isInteger(lease) || lease < LEASE_MIN_S || lease > LEASE_MAX_S)
        throw new ApiError('InvalidField', `LeaseSeconds must be from ${LEASE_MIN_S} to ${LEASE_MAX_S}`, {
          field: 'LeaseSeconds',
        });
      const name = String(b.Name ?? '').slice(0, 256) || 'agent';
      const agentId = await heartbeat(store, target.id, name, String(b.Version ?? '').slice(0, 64), req.ip);
      const claimed = await claimChanges(ctx, target.id, agentId, max, lease);
      reply.header('Cache-Control', 'no-store');
      return { RemoteAgentID: agentId, Changes: claimed };
    },
  );

  app.post<{ Params: IdParams }>(
    '/accountchanges/:id/result',
    { ...agentOpen, preValidation, schema: POST_ACCOUNTCHANGES_ID_RESULT },
    async (req) => {
      const target = appOf(req);
      const b = jsonFields(req, { Lease: 'string', Result: 'string', Error: 'string' });
      if (typeof b.Lease !== 'string' || b.Lease === '')
        throw new ApiError('InvalidField', 'Lease (from the claim) is required', { field: 'Lease' });
      if (b.Result !== 'applied' && b.Result !== 'failed')
        throw new ApiError('InvalidField', 'Result must be "applied" or "failed"', { field: 'Result' });
      return reportChange(ctx, target.id, req.params.id, b.Lease, b.Result, String(b.Error ?? ''));
    },
  );
}

/** The initial password of an account: whether there is one, and fetching it (once). */
function registerPasswordRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const { store } = ctx;
  /** The account, if the caller is its user or an administrator; else 404 (no existence leak). */
  const ownAccount = async (req: FastifyRequest, id: string) => {
    const p = principalOf(req);
    const a = await store.get(Account, id);
    if (!a || (!p.scopes.has('admin') && (p.userId === '' || a.doc.UserID !== p.userId)))
      throw new ApiError('NotFound', `Account ${id} does not exist`);
    return { p, a };
  };

  app.get<{ Params: IdParams }>(
    '/accounts/:id/password',
    { schema: GET_ACCOUNTS_ID_PASSWORD },
    async (req, reply) => {
      const { a } = await ownAccount(req, req.params.id);
      reply.header('Cache-Control', 'no-store');
      return {
        AccountID: a.id,
        HaveInitialPassword: a.doc.HaveInitialPassword === true,
        PasswordFetchTime: a.doc.PasswordFetchTime,
        PasswordFetchedBy: a.doc.PasswordFetchedBy,
      };
    },
  );

  app.post<{ Params: IdParams }>(
    '/accounts/:id/password',
    { schema: POST_ACCOUNTS_ID_PASSWORD },
    async (req, reply) => {
      const { p } = await ownAccount(req, req.params.id);
      const password = await fetchInitialPassword(ctx, req.params.id, p.userId);
      reply.header('Cache-Control', 'no-store');
      return { AccountID: req.params.id, Password: password };
    },
  );
}

/** A user's account suggestions, disabling, and merging two users. */
function registerUserOperations(app: FastifyInstance, ctx: ServiceContext) {
  const { store } = ctx;
  app.post<{ Params: IdParams }>(
    '/users/:id/accounts/suggest',
    { schema: POST_USERS_ID_ACCOUNTS_SUGGEST },
    async (req, reply) => {
      const p = principalOf(req);
      const b = jsonFields(req, { Plan: 'object' });
      const may = await decide(ctx, p, 'User.account-suggestions', {
        kind: 'User',
        id: req.params.id,
        userId: req.params.id,
      });
      if (!may.Allowed)
        throw new ApiError('NotFound', `User ${req.params.id} does not exist`, { rule: may.Rule });
      const user = await store.get(User, req.params.id);
      if (!user) throw new ApiError('NotFound', `User ${req.params.id} does not exist`);
      const changes = await refinedAccountSuggestions(
        ctx,
        user.doc,
        await suggestAccountChanges(ctx, user.doc),
      );
      if (!b.Plan) return { UserID: user.id, Changes: changes };
      const plan = jsonFieldsOf(b.Plan as Doc, { Name: 'string', Reason: 'string' });
      const made = await planAccountChanges(ctx, p, user.id, changes, plan);
      if (made.PlanID !== '') reply.code(201).header('Location', `/accountchangeplans/${made.PlanID}`);
      return { UserID: user.id, Changes: changes, ...made };
    },
  );

  app.post<{ Params: IdParams }>(
    '/users/:id/disable',
    { schema: POST_USERS_ID_DISABLE },
    async (req, reply) => {
      const p = principalOf(req);
      const { Reason } = jsonFields(req, { Reason: 'string' });
      const result = await disableUser(ctx, p, req.params.id, typeof Reason === 'string' ? Reason : '');
      return reply.code(200).type('application/json').send(JSON.stringify(result));
    },
  );

  app.post<{ Params: IdParams; Querystring: { from?: string | string[] } }>(
    '/users/:id/merge',
    { schema: POST_USERS_ID_MERGE },
    async (req, reply) => {
      const p = principalOf(req);
      const b = jsonFields(req, { From: 'string' });
      const q = req.query.from;
      if (Array.isArray(q)) throw new ApiError('BadRequest', 'give from once', { field: 'from' });
      if (q !== undefined && b.From !== undefined && q !== b.From)
        throw new ApiError('BadRequest', "?from= and the body's From name different users", {
          field: 'from',
        });
      await mergeUsers(ctx, p, req.params.id, String(q ?? b.From ?? ''));
      return reply.code(204).send();
    },
  );

  app.get('/users/merge', { schema: GET_USERS_MERGE }, async (req, reply) => {
    await enforce(ctx, principalOf(req), 'User.merge-suggestions', { kind: 'User', id: '' });
    const lines = (await refinedMergeSuggestions(ctx, suggestMerges(await allOf(store, User))))
      .map((s) => `${JSON.stringify(s)}\n`)
      .join('');
    reply.header('Cache-Control', 'private, max-age=0');
    return reply.type('application/x-json-lines').send(lines);
  });
}

function jsonFieldsOf(b: Doc, allowed: Record<string, 'string'>): Record<string, string | undefined> {
  for (const [k, v] of Object.entries(b)) {
    if (!allowed[k])
      throw new ApiError('UnknownField', `Plan.${k} is not a field of a plan here`, { field: `Plan.${k}` });
    if (typeof v !== 'string')
      throw new ApiError('InvalidField', `Plan.${k} must be a string`, { field: `Plan.${k}` });
  }
  return b as Record<string, string>;
}
