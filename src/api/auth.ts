import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { FLOW, formIntent, formOf } from '../auth/factors/factor.js';
import { mountFactor } from '../auth/factors/flow.js';
import { factorsOf } from '../auth/factors/index.js';
import { requiredLevel, tenantDoc } from '../auth/integrity.js';
import { scheduleDeletedUserSweep } from '../auth/leftovers.js';
import { authResponse, otherSession } from '../auth/response.js';
import { setSessionCookie } from '../auth/session/cookies.js';
import {
  deleteSession,
  endRequestSession,
  listSessions,
  pendingCookies,
  requestSession,
  sessionById,
} from '../auth/session/sessions.js';
import { ApiError } from '../core/errors.js';
import { err, formBody, jsonLines, pathParams, queryOf, type RouteSchema } from '../core/routeschema.js';
import { decide, enforce } from '../policy/decide.js';
import type { ServiceContext } from '../store/service.js';
import { principalOf } from './objects.js';

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

/** Whose sessions a request is about: the caller's, or ?user= for administrators. */
async function sessionsOwner(ctx: ServiceContext, req: FastifyRequest): Promise<string> {
  const p = principalOf(req);
  const q = (req.query ?? {}) as Record<string, unknown>;
  if (typeof q.user === 'string' && q.user !== '' && q.user !== p.userId) {
    await enforce(ctx, p, 'User.sessions', { kind: 'User', id: q.user, userId: q.user });
    return q.user;
  }
  if (p.userId === '')
    throw new ApiError('BadRequest', 'these credentials belong to no user: name one with ?user=');
  return p.userId;
}

/** The sign-in flow: POST /auth, sessions, sign-out, and every factor's endpoints. */
export async function registerAuthRoutes(app: FastifyInstance, ctx: ServiceContext) {
  addFormParser(app);
  scheduleDeletedUserSweep(ctx);

  // A token rotated while authenticating (the session was boosted elsewhere) goes out here.
  app.answers.beforeSend((req, reply) => {
    const token = pendingCookies.get(req);
    if (token) {
      pendingCookies.delete(req);
      setSessionCookie(req, reply, token);
    }
  });

  // POST /auth (form intent): an AuthResponse, even when the session may not (yet) do anything.
  app.post('/auth', { ...FLOW, schema: AUTH_STATE }, async (req, reply) => {
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
  app.post('/auth/signout', { ...FLOW, schema: SIGN_OUT }, async (req, reply) => {
    await endRequestSession(req, reply, ctx);
    return reply.code(204).send();
  });

  // The caller's sessions (ListItem JSON lines of OtherSession); ?user=<id> for administrators.
  app.get('/auth/sessions', { schema: SESSIONS }, async (req, reply) => {
    const owner = await sessionsOwner(ctx, req);
    const current = principalOf(req).sessionId;
    const lines = (await listSessions(ctx, owner)).map(
      (s) => `${JSON.stringify({ ID: s.id, Item: otherSession(s, current) })}\n`,
    );
    reply.header('Cache-Control', 'private, max-age=0');
    return reply.type('application/x-json-lines').send(Readable.from(lines));
  });

  // Revokes a session of the caller (any session, for administrators). 204; 404 unknown.
  app.delete<{ Params: { id: string } }>(
    '/auth/sessions/:id',
    { schema: REVOKE_SESSION },
    async (req, reply) => {
      const p = principalOf(req);
      const s = await sessionById(ctx, req.params.id);
      const d =
        s && (await decide(ctx, p, 'User.sessions', { kind: 'User', id: s.userId, userId: s.userId }));
      if (!s || !d?.Allowed)
        throw new ApiError('NotFound', `session ${req.params.id} does not exist`, d ? { rule: d.Rule } : {});
      await deleteSession(ctx, s.id);
      return reply.code(204).send();
    },
  );

  for (const f of factorsOf(ctx)) await mountFactor(app, ctx, f);
}

// The route schemas: what Fastify checks and /openapi.json describes (src/api/openapi.ts).
const tags = ['Sign-in'];
const AUTH_STATE: RouteSchema = {
  tags,
  summary: 'Where the sign-in stands: the AuthResponse (level, next factors), for the intent if one is given',
  security: [{ session: [] }, {}],
  // handler: the sign-in flow's form reader (formOf, field) checks it; its answers to repeated or
  // over-long fields have not been compared with a schema's.
  validatedBy: 'handler',
  body: formBody({ intent: { type: 'string', description: 'Signed intent (the level asked for)' } }),
  response: {
    200: { description: 'The AuthResponse (docs/signin.md)', type: 'object' },
    400: err('A bad intent'),
  },
};
const SIGN_OUT: RouteSchema = {
  tags,
  summary: 'End this session (204 whether or not there was one)',
  security: [{ session: [] }, {}],
  response: { 204: { description: 'Signed out' } },
};
const SESSIONS: RouteSchema = {
  tags,
  summary: 'The caller’s sessions as JSON lines of OtherSession; ?user= for administrators',
  // handler: a repeated ?user= is taken as none (the caller's own sessions); the schema would refuse it.
  validatedBy: 'handler',
  querystring: queryOf({ user: { type: 'string', description: 'Another user (administrators)' } }),
  response: { 200: jsonLines('One ListItem per line'), 403: err('Not allowed for these credentials') },
};
const REVOKE_SESSION: RouteSchema = {
  tags,
  summary: 'Revoke a session of the caller (any session, for administrators)',
  params: pathParams('id'),
  response: { 204: { description: 'Revoked' }, 404: err('No such session (or not the caller’s)') },
};
