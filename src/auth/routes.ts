import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../api/context.js';
import { ApiError } from '../api/errors.js';
import { principalOf } from '../api/objects.js';
import { User } from '../objects/user.js';
import { FLOW, formIntent, formOf } from './factors/factor.js';
import { factors } from './factors/index.js';
import { FACTOR_KINDS, LEVEL_NAMES, Level, requiredLevel, tenantDoc } from './integrity.js';
import { hasAnyScope } from './permissions.js';
import { setSessionCookie } from './session/cookies.js';
import {
  deleteSession,
  endRequestSession,
  listSessions,
  pendingCookies,
  requestSession,
  type Session,
  sessionById,
} from './session/sessions.js';

const FORM = 'application/x-www-form-urlencoded';

/** Form bodies: repeated names become arrays, so single-valued fields can refuse them. */
export function addFormParser(app: FastifyInstance) {
  if (app.hasContentTypeParser(FORM)) return;
  app.addContentTypeParser(FORM, { parseAs: 'string' }, (_req, body, done) => {
    const out: Record<string, string | string[]> = Object.create(null);
    for (const [k, v] of new URLSearchParams(String(body))) {
      const prev = out[k];
      out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    done(null, { ...out });
  });
}

/** AuthResponse: where the session stands, against an intent or the tenant's read level. */
export async function authResponse(
  ctx: ServiceContext,
  s: Session | undefined,
  need: number,
  intent?: { method: string; path: string },
) {
  const level = s?.level ?? 0;
  const user = s && s.userId !== '' ? await ctx.store.get(User, s.userId) : undefined;
  const secret = user ? await ctx.store.getSecret(User, user.id) : {};
  const usable = user
    ? factors.filter((f) => f.kind && f.enrolled?.(user.doc, secret)).map((f) => f.name)
    : [];
  const next = user ? usable.filter((n) => !s?.factors.includes(n)) : ['email'];
  // The best level this user's factors can reach (what the sign-in pages aim for).
  const kinds = new Set(usable.map((n) => FACTOR_KINDS[n]));
  const reachable = !user
    ? Level.Identified
    : kinds.size >= 2
      ? Level.TwoFactors
      : kinds.size === 1
        ? Level.OneFactor
        : Level.Identified;
  return {
    Authorized: user !== undefined && level >= need,
    IntegrityLevel: level,
    IntegrityLevelName: LEVEL_NAMES[level],
    RequiredLevel: need,
    ReachableLevel: Math.max(reachable, level),
    SessionID: s?.id ?? '',
    UserID: s?.userId ?? '',
    Email: user ? String(user.doc.Email ?? '') : '',
    Active: user ? user.doc.Active === true : false,
    Proven: s?.factors ?? [],
    Factors: next,
    Expires: s ? new Date(s.expireTime).toISOString() : '',
    ...(intent ? { Method: intent.method, Path: intent.path } : {}),
  };
}

/** The OtherSession item of a session (GET /auth/sessions and the event stream). */
/** The OtherSession shape (GET /auth/sessions items, the event stream's OtherSession kind). */
export function otherSession(s: Session, current: string | undefined) {
  return {
    ID: s.id,
    Current: s.id === current,
    UserID: s.userId,
    IntegrityLevel: s.level,
    Factors: s.factors,
    CreateTime: new Date(s.createTime).toISOString(),
    LastSeen: new Date(s.lastSeen).toISOString(),
    ExpireTime: new Date(s.expireTime).toISOString(),
    UserAgent: s.data.UserAgent ?? '',
    Address: s.data.Address ?? '',
    ...(s.data.Location ? { Location: s.data.Location } : {}),
  };
}

/** Whose sessions a request is about: the caller's, or ?user= for administrators. */
function sessionsOwner(req: FastifyRequest): string {
  const p = principalOf(req);
  const q = (req.query ?? {}) as Record<string, unknown>;
  if (typeof q.user === 'string' && q.user !== '' && q.user !== p.userId) {
    if (!hasAnyScope(p, ['admin']))
      throw new ApiError('Forbidden', "only administrators may see other users' sessions");
    return q.user;
  }
  if (p.userId === '')
    throw new ApiError('BadRequest', 'these credentials belong to no user: name one with ?user=');
  return p.userId;
}

/** The sign-in flow: POST /auth, sessions, sign-out, and every factor's endpoints. */
export async function registerAuthRoutes(app: FastifyInstance, ctx: ServiceContext) {
  addFormParser(app);
  for (const f of factors) if (f.kind) FACTOR_KINDS[f.name] = f.kind;

  // A token rotated while authenticating (the session was boosted elsewhere) goes out here.
  app.addHook('onSend', async (req: FastifyRequest, reply: FastifyReply, payload) => {
    const token = pendingCookies.get(req);
    if (token) {
      pendingCookies.delete(req);
      setSessionCookie(req, reply, token);
    }
    return payload;
  });

  // POST /auth (form intent): an AuthResponse, even when the session may not (yet) do anything.
  app.post('/auth', FLOW, async (req, reply) => {
    const form = formOf(req);
    const { session } = await requestSession(req, ctx);
    const intent = await formIntent(ctx, form, session);
    const need = intent ? intent.lvl : requiredLevel(await tenantDoc(ctx), 'read');
    reply.header('Cache-Control', 'no-store');
    return reply
      .code(200)
      .type('application/json')
      .send(JSON.stringify(await authResponse(ctx, session, need, intent)));
  });

  // Sign-out: ends this session (204 whether or not there was one).
  app.post('/auth/signout', FLOW, async (req, reply) => {
    await endRequestSession(req, reply, ctx);
    return reply.code(204).send();
  });

  // The caller's sessions (ListItem JSON lines of OtherSession); ?user=<id> for administrators.
  app.get('/auth/sessions', async (req, reply) => {
    const owner = sessionsOwner(req);
    const current = principalOf(req).sessionId;
    const lines = (await listSessions(ctx, owner)).map(
      (s) => `${JSON.stringify({ ID: s.id, Item: otherSession(s, current) })}\n`,
    );
    reply.header('Cache-Control', 'private, max-age=0');
    return reply.type('application/x-json-lines').send(Readable.from(lines));
  });

  // Revokes a session of the caller (any session, for administrators). 204; 404 unknown.
  app.delete<{ Params: { id: string } }>('/auth/sessions/:id', async (req, reply) => {
    const p = principalOf(req);
    const s = await sessionById(ctx, req.params.id);
    if (!s || (s.userId !== p.userId && !hasAnyScope(p, ['admin'])))
      throw new ApiError('NotFound', `session ${req.params.id} does not exist`);
    await deleteSession(ctx, s.id);
    return reply.code(204).send();
  });

  for (const f of factors) await f.register(app, ctx);
}
