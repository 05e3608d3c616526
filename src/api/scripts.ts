import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { access } from '../auth/permissions.js';
import { ApiError, ErrorCodes } from '../core/errors.js';
import { requirePlannableName } from '../directory/changes.js';
import { applyOp, loadGroup } from '../groups/lifecycle.js';
import { AccountChange } from '../objects/accountchange.js';
import { Membership } from '../objects/membership.js';
import { Script } from '../objects/script.js';
import { User } from '../objects/user.js';
import { type Doc, normalize } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { groupMembershipHook, userWriteHook } from '../scripts/hooks.js';
import { startScriptLogPruning } from '../scripts/logs.js';
import { groupsOf, hasScripts, iterate } from '../scripts/runner.js';
import { runTests, type TestCase } from '../scripts/testing.js';
import type { ServiceContext } from '../store/context.js';
import type { StoredObject } from '../store/objects.js';

/**
 * Scripts over HTTP: POST /scripts/test, and the glue that runs the user-write and
 * group-membership hooks around the generic User writes of src/api/objects.ts (which calls
 * beforeObjectWrite and afterObjectWrite). Registered after the object routes; the literal path
 * /scripts/test wins over /scripts/:id in the router whatever the order.
 */
export function registerScriptRoutes(app: FastifyInstance, ctx: ServiceContext) {
  startScriptLogPruning(app, ctx);
  app.post('/scripts/test', async (req, reply) => testScript(req, reply, ctx));
  app.route({
    method: ['GET', 'PUT', 'DELETE', 'PATCH'],
    url: '/scripts/test',
    handler: () => {
      throw new ApiError(
        'MethodNotAllowed',
        'POST /scripts/test runs a script; other methods are not served',
        {
          headers: { Allow: 'POST' },
        },
      );
    },
  });
}

async function testScript(req: FastifyRequest, reply: FastifyReply, ctx: ServiceContext) {
  const p = req.principal;
  if (!p) throw new ApiError('Unauthenticated', 'authentication required');
  if (!access(p, Script.kind, 'create'))
    throw new ApiError('Forbidden', 'your credentials may not run scripts');
  const script = normalize(Script.fields, req.body ?? {}, undefined);
  const text = String(script.Tests ?? '').trim();
  const cases = (text === '' ? [] : JSON.parse(text)) as TestCase[];
  const report = await runTests(ctx, script, cases);
  const lines = report.logs.map((l) => `${JSON.stringify(l)}\n`).join('');
  if (report.verdict === 'passed' && !report.output) return reply.code(204).send();
  reply.type('application/x-json-lines');
  if (report.verdict === 'passed') return reply.code(200).send(lines);
  const kind = report.verdict === 'compile-failed' ? 'ScriptCompileFailed' : 'ScriptTestsFailed';
  reply.header('X-Error-Code', ErrorCodes[kind].code);
  return reply.code(ErrorCodes[kind].status).send(lines);
}

/**
 * Before a User is created or updated through the API: the user-write scripts may set fields (the
 * body is returned with them) or reject the write (422). Runs after the caller was authorized for
 * the operation. Returns whether the body changed (the caller then checks its field rules again).
 */
export async function beforeObjectWrite(
  ctx: ServiceContext,
  req: FastifyRequest,
  type: ObjectType,
  id: string | undefined,
): Promise<boolean> {
  if (type === AccountChange) {
    await accountChangeRules(ctx, req, id);
    return false;
  }
  if (type !== User || !(await hasScripts(ctx, 'user-write'))) return false;
  const body = req.body ?? {};
  const previous = id === undefined ? undefined : (await ctx.store.get(User, id))?.doc;
  if (id !== undefined && !previous) return false; // the store answers 404
  let proposed: Doc;
  try {
    proposed = normalize(User.fields, body, previous);
  } catch {
    return false; // the store refuses the body with the same error
  }
  const set = await userWriteHook(ctx, {
    Operation: previous ? 'update' : 'create',
    User: { ...proposed, ID: id ?? '' },
    Previous: previous ?? null,
    ActorUserID: req.principal?.userId ?? '',
  });
  if (Object.keys(set).length === 0) return false;
  req.body = { ...(body as Doc), ...set };
  return true;
}

/**
 * The account rules for a change planned through the generic API (POST/PUT /accountchanges),
 * as for every other way of planning one (src/directory/changes.ts): 409 when the name is another
 * user's on the App. Belongs to the one write path's before-hooks (#23) once there is one.
 */
async function accountChangeRules(ctx: ServiceContext, req: FastifyRequest, id: string | undefined) {
  const previous = id === undefined ? undefined : (await ctx.store.get(AccountChange, id))?.doc;
  if (id !== undefined && !previous) return; // the store answers 404
  let proposed: Doc;
  try {
    proposed = normalize(AccountChange.fields, req.body ?? {}, previous);
  } catch {
    return; // the store refuses the body with the same error
  }
  await requirePlannableName(ctx, proposed, id ?? '');
}

/** A membership a group-membership script made says so in its reason. */
export const SCRIPT_MEMBERSHIP_REASON = 'granted by a group-membership script';

/**
 * After a User was created or updated through the API: the group-membership scripts name the
 * groups the user should be in; missing memberships are added (as the service, through the
 * membership lifecycle, so a standing rejection is respected), and memberships a script added
 * before that no script names any more are removed. Memberships people made are never removed.
 */
export async function afterObjectWrite(
  ctx: ServiceContext,
  type: ObjectType,
  obj: StoredObject,
  isCreate: boolean,
) {
  if (type !== User || !(await hasScripts(ctx, 'group-membership'))) return;
  const current = await groupsOf(ctx, obj.id);
  const wanted = await groupMembershipHook(ctx, {
    Operation: isCreate ? 'create' : 'update',
    User: obj.doc,
    Groups: current,
  });
  if (!wanted) return;
  const want = new Set(wanted);
  const byGroup = new Map<string, Doc>();
  for await (const m of iterate(ctx, Membership, { filter: `UserID = ${JSON.stringify(obj.id)}` }))
    byGroup.set(String(m.GroupID), m);
  const apply = async (groupId: string, op: 'add' | 'remove') => {
    try {
      const group = await loadGroup(ctx, groupId);
      await applyOp(ctx, {
        op,
        group,
        userId: obj.id,
        actor: 'system',
        roles: new Set(['admin']),
        reason: SCRIPT_MEMBERSHIP_REASON,
      });
    } catch (err) {
      // An unknown group or a transition the lifecycle refuses (a rejection stands): skipped.
      ctx.logger.info({ err, group: groupId, user: obj.id, op }, 'group-membership script change skipped');
    }
  };
  for (const g of want) {
    const state = String(byGroup.get(g)?.State ?? 'none');
    if (state === 'none' || state === 'requested' || state === 'expired') await apply(g, 'add');
  }
  for (const [g, m] of byGroup) {
    const byScript = (m.Approval as Doc | undefined)?.Reason === SCRIPT_MEMBERSHIP_REASON;
    if (byScript && !want.has(g) && (m.State === 'approved' || m.State === 'active'))
      await apply(g, 'remove');
  }
}

/** POST /scripts/test in the OpenAPI document (src/api/openapi.ts adds it to the object paths). */
export const SCRIPT_OPENAPI_PATHS = {
  '/scripts/test': {
    post: {
      tags: ['Script'],
      summary: "Run an unsaved Script's tests (docs/scripts.md)",
      requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Script' } } } },
      responses: {
        204: { description: 'Every test passed and nothing was logged' },
        200: {
          description: 'Every test passed; one ScriptLog per line',
          content: { 'application/x-json-lines': { schema: { $ref: '#/components/schemas/ScriptLog' } } },
        },
        400: { description: 'Invalid Script (e.g. Tests is not a list of test cases)' },
        403: { description: 'The credentials may not create scripts' },
        422: {
          description: 'Script Tests Failed: one ScriptLog per line, Passed false on the failing ones',
          content: { 'application/x-json-lines': { schema: { $ref: '#/components/schemas/ScriptLog' } } },
        },
        500: {
          description: 'Script Compile Failed: the ScriptLog with the compile error',
          content: { 'application/x-json-lines': { schema: { $ref: '#/components/schemas/ScriptLog' } } },
        },
      },
    },
  },
};
