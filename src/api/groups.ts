import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Principal } from '../auth/principal.js';
import { ApiError } from '../core/errors.js';
import { checkMembership } from '../groups/check.js';
import {
  actsAsUser,
  applyOp,
  type GroupSettings,
  isApprover,
  loadGroup,
  requireUser,
  rolesOf,
} from '../groups/lifecycle.js';
import { reportStream } from '../groups/report.js';
import type { MemberOp } from '../groups/states.js';
import { rowsFor } from '../groups/states.js';
import { scheduleExpirySweep } from '../groups/sweep.js';
import { Membership, membershipId } from '../objects/membership.js';
import { decide, enforce } from '../policy/decide.js';
import { parseListQuery, type RawListQuery } from '../store/listquery.js';
import type { ServiceContext } from '../store/service.js';
import { registerGroupPages } from '../web/groups.js';
import {
  GROUP_CHECK,
  GROUP_MEMBERS,
  GROUP_REPORT,
  MAX_REASON,
  MEMBER_GET,
  MEMBER_HISTORY,
  memberOpSchema,
  USER_GROUPS,
} from './groupschemas.js';
import { setObjectHeaders } from './http.js';
import { principalOf } from './objects.js';

type MemberParams = { id: string; user: string };
type FormBody = Record<string, string | string[]>;

const FORM = 'application/x-www-form-urlencoded';

/** Form bodies (reason=..., or the check's user/group/op/next), parsed with URLSearchParams. */
function addFormParser(app: FastifyInstance) {
  if (app.hasContentTypeParser(FORM)) return; // someone (the sign-in routes) added one globally
  app.addContentTypeParser(FORM, { parseAs: 'string', bodyLimit: 64 * 1024 }, (_req, body, done) => {
    const out: FormBody = Object.create(null);
    for (const [k, v] of new URLSearchParams(body as string)) {
      const prev = out[k];
      out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    done(null, out);
  });
}

const isForm = (req: FastifyRequest) => (req.headers['content-type'] ?? '').toLowerCase().startsWith(FORM);

/** The optional body field of a form or JSON body: only `allowed` names are accepted. */
function bodyFields(req: FastifyRequest, jsonNames: readonly string[], formNames: readonly string[]) {
  const body = req.body;
  if (body === undefined || body === null || body === '') return {} as Record<string, unknown>;
  if (typeof body !== 'object' || Array.isArray(body))
    throw new ApiError('InvalidJSON', 'the body must be a JSON object or a form');
  const names = isForm(req) ? formNames : jsonNames;
  for (const k of Object.keys(body)) {
    if (!names.includes(k))
      throw new ApiError(
        'UnknownField',
        `${k} is not a field of this request; expected ${names.join(', ')}`,
        {
          field: k,
        },
      );
  }
  return body as Record<string, unknown>;
}

function oneString(v: unknown, name: string, max: number): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string')
    throw new ApiError('InvalidField', `${name} must be a single string`, { field: name });
  if (v.length > max)
    throw new ApiError('InvalidField', `${name} is longer than ${max} characters`, { field: name });
  return v;
}

/** The optional reason: JSON {"Reason": "..."} or form reason=...; text, line breaks allowed. */
export function reasonOf(req: FastifyRequest): string {
  const body = bodyFields(req, ['Reason'], ['reason']);
  const name = isForm(req) ? 'reason' : 'Reason';
  const reason = oneString(body[name], name, MAX_REASON) ?? '';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(reason))
    throw new ApiError('InvalidField', `${name} must not contain control characters`, { field: name });
  return reason;
}

const toArray = (v: string | string[] | undefined): string[] =>
  v === undefined ? [] : Array.isArray(v) ? v : [v];

/** May the caller read every membership of this group (admin, sync, audit, or its approver)? */
async function mayReadGroup(ctx: ServiceContext, p: Principal, group: GroupSettings) {
  const approver = await isApprover(ctx, p, group);
  return (await decide(ctx, p, 'Group.members', { kind: 'Group', id: group.ID, facts: { approver } }))
    .Allowed;
}

export function registerGroupRoutes(app: FastifyInstance, ctx: ServiceContext) {
  app.register(async (sub) => {
    addFormParser(sub);
    registerGroupPages(sub, ctx);
    registerGroupQueries(sub, ctx);
    registerMembershipReads(sub, ctx);
    registerMembershipChanges(sub, ctx);
  });

  scheduleExpirySweep(ctx);
}

function sendMembership(
  reply: FastifyReply,
  obj: { id: string; data: string } & Parameters<typeof setObjectHeaders>[2],
  code: number,
) {
  setObjectHeaders(reply, Membership, obj);
  return reply.code(code).type('application/json').send(obj.data);
}

async function sendList(
  ctx: ServiceContext,
  req: FastifyRequest<{ Querystring: RawListQuery }>,
  reply: FastifyReply,
  filter: string,
) {
  const raw: RawListQuery = { ...req.query, filter: [...toArray(req.query.filter), filter] };
  const page = await ctx.store.list(Membership, parseListQuery(Membership, raw));
  if (page.startCursor !== undefined) reply.header('X-Start-Cursor', page.startCursor);
  if (page.endCursor !== undefined) reply.header('X-End-Cursor', page.endCursor);
  reply.header('Cache-Control', 'private, max-age=0');
  return reply.type('application/x-json-lines').send(Readable.from(page.chunks));
}

/** The body of POST /groups/check (JSON or form), checked field by field. */
function checkRequestOf(req: FastifyRequest) {
  const form = isForm(req);
  const body = bodyFields(
    req,
    ['User', 'Groups', 'Op', 'Next', 'IntegrityLevel'],
    ['user', 'group', 'op', 'next', 'integrity'],
  );
  const user = oneString(form ? body.user : body.User, form ? 'user' : 'User', 64);
  if (!user) throw new ApiError('InvalidField', 'name the user to check', { field: form ? 'user' : 'User' });
  const rawGroups = form ? body.group : body.Groups;
  const groups = rawGroups === undefined ? [] : Array.isArray(rawGroups) ? rawGroups : [rawGroups];
  if (!groups.every((g) => typeof g === 'string' && g.length <= 64))
    throw new ApiError('InvalidField', 'groups must be group IDs', { field: form ? 'group' : 'Groups' });
  const op = oneString(form ? body.op : body.Op, form ? 'op' : 'Op', 3) ?? 'and';
  if (op !== 'and' && op !== 'or')
    throw new ApiError('InvalidField', 'op must be "and" or "or"', { field: form ? 'op' : 'Op' });
  const next = oneString(form ? body.next : body.Next, form ? 'next' : 'Next', 2048);
  const rawLevel = form ? body.integrity : body.IntegrityLevel;
  const level = typeof rawLevel === 'string' && /^\d$/.test(rawLevel) ? Number(rawLevel) : rawLevel;
  if (
    level !== undefined &&
    !(typeof level === 'number' && Number.isInteger(level) && level >= 0 && level <= 4)
  )
    throw new ApiError('InvalidField', 'the integrity level must be a whole number from 0 to 4', {
      field: form ? 'integrity' : 'IntegrityLevel',
    });
  return {
    user,
    groups: groups as string[],
    op: op as 'and' | 'or',
    next,
    level: level as number | undefined,
  };
}

/** The report, the membership check, and the lists of a group's members and a user's groups. */
function registerGroupQueries(sub: FastifyInstance, ctx: ServiceContext) {
  // Literal paths: find-my-way prefers them to /groups/:id, whatever the registration order.
  sub.get('/groups/report.csv', { schema: GROUP_REPORT }, async (req, reply) => {
    await enforce(ctx, principalOf(req), 'Group.report', { kind: 'Group', id: '' });
    reply.header('Cache-Control', 'private, max-age=0');
    reply.header('Content-Disposition', 'attachment; filename="report.csv"');
    return reply.type('text/csv; charset=utf-8').send(reportStream(ctx));
  });

  sub.post('/groups/check', { schema: GROUP_CHECK }, async (req, reply) => {
    await enforce(ctx, principalOf(req), 'Group.check', { kind: 'Group', id: '' });
    const { user, groups, op, next, level } = checkRequestOf(req);
    const result = await checkMembership(ctx, user, groups, op, {
      ...(next !== undefined ? { next } : {}),
      ...(level !== undefined ? { integrityLevel: level } : {}),
      origin: `${req.protocol}://${req.host}`,
    });
    return reply.code(200).type('application/json').send(JSON.stringify(result));
  });

  sub.get<{ Params: { id: string }; Querystring: RawListQuery }>(
    '/groups/:id/members',
    { schema: GROUP_MEMBERS },
    async (req, reply) => {
      const p = principalOf(req);
      const group = await loadGroup(ctx, req.params.id);
      if (!(await mayReadGroup(ctx, p, group)))
        throw new ApiError('Forbidden', `your credentials may not list the members of group ${group.ID}`);
      return sendList(ctx, req, reply, `GroupID = ${JSON.stringify(group.ID)}`);
    },
  );

  sub.get<{ Params: { id: string }; Querystring: RawListQuery }>(
    '/users/:id/groups',
    { schema: USER_GROUPS },
    async (req, reply) => {
      const p = principalOf(req);
      // A key that does not act as its user (no user scope) lists its user's groups only with audit or sync.
      const as = actsAsUser(p) ? p : { ...p, userId: '' };
      await enforce(ctx, as, 'User.groups', { kind: 'User', id: req.params.id, userId: req.params.id });
      await requireUser(ctx, req.params.id);
      return sendList(ctx, req, reply, `UserID = ${JSON.stringify(req.params.id)}`);
    },
  );
}

/** One membership and its history: for the group's readers and the member themself. */
function registerMembershipReads(sub: FastifyInstance, ctx: ServiceContext) {
  const readOne = async (req: FastifyRequest<{ Params: MemberParams }>) => {
    const p = principalOf(req);
    const group = await loadGroup(ctx, req.params.id);
    const self = p.userId !== '' && p.userId === req.params.user && actsAsUser(p);
    if (!self && !(await mayReadGroup(ctx, p, group)))
      throw new ApiError('Forbidden', `your credentials may not read the members of group ${group.ID}`);
    await requireUser(ctx, req.params.user);
    return membershipId(group.ID, req.params.user);
  };

  sub.get<{ Params: MemberParams }>(
    '/groups/:id/members/:user',
    { schema: MEMBER_GET },
    async (req, reply) => {
      const id = await readOne(req);
      const obj = await ctx.store.get(Membership, id);
      if (!obj)
        throw new ApiError('NotFound', `user ${req.params.user} is not a member of group ${req.params.id}`);
      return sendMembership(reply, obj, 200);
    },
  );

  // Every version of the membership, oldest first, from the change log (an empty Item: deleted).
  sub.get<{ Params: MemberParams }>(
    '/groups/:id/members/:user/history',
    { schema: MEMBER_HISTORY },
    async (req, reply) => {
      const id = await readOne(req);
      const rows = await ctx.db.kysely
        .selectFrom('changes')
        .select(['seq', 'data'])
        .where('type', '=', Membership.kind)
        .where('id', '=', id)
        .orderBy('seq')
        .execute();
      const body = rows.map((r) => `{"ID":${JSON.stringify(id)},"Item":${r.data ?? '{}'}}\n`).join('');
      reply.header('Cache-Control', 'private, max-age=0');
      return reply.type('application/x-json-lines').send(body);
    },
  );
}

/** One lifecycle operation: 404 group, 403 caller, 404 user, 409 state, in that order. */
async function memberOp(
  ctx: ServiceContext,
  req: FastifyRequest<{ Params: MemberParams }>,
  reply: FastifyReply,
  routeOp: MemberOp,
) {
  const p = principalOf(req);
  const reason = reasonOf(req);
  const group = await loadGroup(ctx, req.params.id);
  const userId = req.params.user;
  const roles = await rolesOf(ctx, p, group, userId);
  // POST .../members/:user is an addition by a decider, or a user's own request to join.
  const op: MemberOp =
    routeOp === 'add' && !roles.has('admin') && !roles.has('sync') && !roles.has('approver')
      ? 'request'
      : routeOp;
  if (rowsFor(op, roles).length === 0)
    throw new ApiError(
      'Forbidden',
      `your credentials may not ${routeOp === 'add' ? 'add members to' : `${op} members of`} group ${group.ID}`,
    );
  await requireUser(ctx, userId);
  const result = await applyOp(ctx, { op, group, userId, actor: p, roles, reason });
  if (!result.obj) return reply.code(204).send();
  return sendMembership(reply, result.obj, result.created ? 201 : 200);
}

/** Add, remove, and the lifecycle operations of a membership (docs/groups.md). */
function registerMembershipChanges(sub: FastifyInstance, ctx: ServiceContext) {
  sub.post<{ Params: MemberParams }>(
    '/groups/:id/members/:user',
    { schema: memberOpSchema('add') },
    (req, reply) => memberOp(ctx, req, reply, 'add'),
  );
  sub.delete<{ Params: MemberParams }>(
    '/groups/:id/members/:user',
    { schema: memberOpSchema('remove') },
    (req, reply) => memberOp(ctx, req, reply, 'remove'),
  );
  for (const op of ['activate', 'approve', 'reject', 'unreject', 'use'] as const) {
    sub.post<{ Params: MemberParams }>(
      `/groups/:id/members/:user/${op}`,
      { schema: memberOpSchema(op) },
      (req, reply) => memberOp(ctx, req, reply, op),
    );
  }
}
