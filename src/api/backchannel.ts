import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticateApiKey, userUsable } from '../auth/apikeys.js';
import { signingInFor } from '../auth/session/complete.js';
import { membershipsAdapter, sessionsAdapter } from '../backchannel/adapters.js';
import { issueCode, redeemCode } from '../backchannel/codes.js';
import { countingGroups } from '../backchannel/groups.js';
import { type Ports, type ProxySession, portsOf } from '../backchannel/ports.js';
import { issueProxyToken, recordProxy } from '../backchannel/tokens.js';
import { ApiError } from '../core/errors.js';
import { requestPage, signinBase } from '../groups/check.js';
import { APIKey } from '../objects/apikey.js';
import { App } from '../objects/app.js';
import { User } from '../objects/user.js';
import { VirtualHost } from '../objects/virtualhost.js';
import { appMayConcern, appServesUser } from '../policy/apps.js';
import { timestampMs } from '../schema/fields.js';
import { parseListQuery } from '../store/listquery.js';
import type { StoredObject } from '../store/objects.js';
import type { ServiceContext } from '../store/service.js';
import {
  type AccessCheckRequest,
  BACKCHANNEL,
  type HostRoute,
  PROXY_PATHS,
  type RegisterRequest,
  type RegisterResponse,
  type WireIdentity,
} from '../wire/proxy.js';
import {
  PROXY_ACCESS_CHECK,
  PROXY_APIKEY,
  PROXY_REGISTER,
  PROXY_SESSION_CHECK,
  PROXY_SESSION_EXCHANGE,
  PROXY_SIGNIN,
  PROXY_TOKEN,
} from './backchannelschemas.js';
import { principalOf } from './objects.js';
import { proxyApp, proxyTokenFirst } from './proxytoken.js';

async function identityOf(
  ctx: ServiceContext,
  userId: string,
  expires?: Date,
  sessionId?: string,
  /** The session's integrity level; undefined for an API key (its groups count as at level 0). */
  level?: number,
): Promise<WireIdentity> {
  const user = await ctx.store.get(User, userId);
  if (!user || !userUsable(user.doc))
    throw new ApiError('Forbidden', 'the user is disabled, suspended or deleted');
  const d = user.doc;
  const id: WireIdentity = {
    UserID: user.id,
    UserName: String(d.UserName ?? ''),
    Email: String(d.Email ?? ''),
    FullName: String((d.Name as { FullName?: string } | undefined)?.FullName ?? ''),
  };
  if (sessionId) id.SessionID = sessionId;
  if (expires && Number.isFinite(expires.getTime())) id.Expires = expires.toISOString();
  // For the proxy's signed identity assertion (docs/federation.md).
  id.Groups = await countingGroups(ctx, user.id, level ?? 0);
  if (level !== undefined) id.IntegrityLevel = level;
  return id;
}

/**
 * May this user use the App: the policy's one answer (src/policy/apps.ts, appServesUser): a
 * usable user passing App.AccessGroups for this session (`level` the session's; an API key has
 * none: 0). Every identity handed to a proxy passes here; 403 naming the rule otherwise.
 */
async function requireAppAccess(
  ctx: ServiceContext,
  app: StoredObject,
  userId: string,
  level: number,
  location?: ProxySession['location'],
) {
  const d = await appServesUser(ctx, { ...app.doc, ID: app.id }, userId, {
    level,
    ...(location ? { location } : {}),
  });
  if (!d.Allowed)
    throw new ApiError('AppRefused', `this user may not use App ${app.id}: ${d.Reason} (${d.Rule})`);
}

function body<T>(req: FastifyRequest, fields: Partial<Record<keyof T & string, 'string' | 'strings'>>): T {
  const b = req.body as Record<string, unknown> | undefined;
  if (!b || typeof b !== 'object' || Array.isArray(b))
    throw new ApiError('InvalidJSON', 'the body must be a JSON object');
  for (const [k, kind] of Object.entries(fields)) {
    const v = b[k];
    const ok =
      kind === 'string'
        ? typeof v === 'string' && v.length <= 4096
        : Array.isArray(v) && v.length <= 64 && v.every((x) => typeof x === 'string');
    if (!ok)
      throw new ApiError(
        'InvalidField',
        `${k} must be ${kind === 'string' ? 'a string' : 'a list of strings'}`,
        { field: k },
      );
  }
  return b as T;
}

const needSessions = (ports: Ports) => {
  if (!ports.sessions) throw new ApiError('Unavailable', 'sessions are not available in this service build');
  return ports.sessions;
};

/** Origins a proxy of this App may receive sign-in codes at: App.URL, App.AllowedOrigins, its VirtualHosts. */
async function appOrigins(ctx: ServiceContext, app: StoredObject): Promise<Set<string>> {
  const out = new Set<string>();
  const add = (u: string) => {
    try {
      out.add(new URL(u).origin);
    } catch {
      // not a URL: ignore
    }
  };
  if (app.doc.URL) add(String(app.doc.URL));
  for (const o of (app.doc.AllowedOrigins as string[] | undefined) ?? []) add(o);
  for (const host of await appHosts(ctx, app.id)) add(`https://${host.Name}`);
  return out;
}

/** The App's VirtualHosts: their names, what the proxy routes by (Upstream, Auth), ACME. */
async function appHosts(ctx: ServiceContext, appId: string): Promise<(HostRoute & { ACME: boolean })[]> {
  const page = await ctx.store.list(
    VirtualHost,
    parseListQuery(VirtualHost, { filter: `AppID = ${JSON.stringify(appId)}` }),
  );
  const hosts: (HostRoute & { ACME: boolean })[] = [];
  for await (const chunk of page.chunks)
    for (const line of chunk.split('\n')) {
      if (!line) continue;
      const { ID, Item } = JSON.parse(line) as {
        ID: string;
        Item: { Upstream?: unknown; Auth?: unknown; ACME?: unknown };
      };
      hosts.push({
        Name: String(ID),
        Upstream: String(Item.Upstream ?? ''),
        Auth: String(Item.Auth ?? ''),
        ACME: Item.ACME !== false,
      });
    }
  return hosts;
}

/**
 * The service side of the proxy back channel, plus POST /apps/:id/proxytoken. Every /proxy/v1
 * call except the browser-facing /signin is authenticated with the proxy token.
 */
export function registerProxyBackchannel(app: FastifyInstance, ctx: ServiceContext) {
  const ports = portsOf(ctx);
  ports.sessions ??= sessionsAdapter;
  ports.memberships ??= membershipsAdapter;
  registerProxyToken(app, ctx);
  registerProxyRegistration(app, ctx);
  registerIdentityLookups(app, ctx);
  registerAccessCheck(app, ctx);
  registerProxySignin(app, ctx);
}

/** The back channel's calls carry the proxy token, checked by proxyApp, not user credentials. */
const open = { config: { auth: 'none' as const } };

function registerProxyToken(app: FastifyInstance, ctx: ServiceContext) {
  // Admin: issue (or replace) the token tying a proxy to this App. Shown once; only its hash is kept.
  app.post('/apps/:id/proxytoken', { schema: PROXY_TOKEN }, async (req, reply) => {
    const { id } = req.params as { id: string };
    const token = await issueProxyToken(ctx, principalOf(req), id);
    reply.header('Cache-Control', 'no-store');
    return reply
      .code(201)
      .type('application/json')
      .send(JSON.stringify({ AppID: id, Token: token }));
  });
}

/** A proxy starts: its App, its hosts and where users ask for access. */
function registerProxyRegistration(app: FastifyInstance, ctx: ServiceContext) {
  const { preValidation, appOf } = proxyTokenFirst(ctx);
  app.post(`${BACKCHANNEL}/register`, { ...open, preValidation, schema: PROXY_REGISTER }, async (req) => {
    const a = appOf(req);
    const b = body<RegisterRequest>(req, { Name: 'string', Version: 'string', Address: 'string' });
    const name = b.Name.slice(0, 256) || 'proxy';
    const agentId = await recordProxy(ctx, a.id, { name, version: b.Version, address: b.Address });
    const hosts = await appHosts(ctx, a.id);
    const out: RegisterResponse = {
      AppID: a.id,
      AppName: String(a.doc.Name ?? ''),
      RemoteAgentID: agentId,
      // Certificates only for the names that want one from ACME.
      VirtualHosts: hosts.filter((h) => h.ACME).map((h) => h.Name),
      ProxyAuth: String(a.doc.ProxyAuth ?? ''),
      Hosts: hosts.map(({ Name, Upstream, Auth }) => ({ Name, Upstream, Auth })),
      // The origins the App is served on: forward auth starts a sign-in only for these.
      Origins: [...(await appOrigins(ctx, a))],
    };
    // Where a user the App is closed to asks for access: its first AccessGroup's request page.
    const groups = Array.isArray(a.doc.AccessGroups) ? (a.doc.AccessGroups as string[]) : [];
    if (groups[0]) {
      let base = await signinBase(ctx);
      if (base.startsWith('/')) base = `${req.protocol}://${req.host}${base}`;
      out.AccessRequestURL = requestPage(base, groups[0]);
    }
    return out;
  });
}

/** Who is behind an API key, a sign-in code or a session, for the proxy to pass on. */
function registerIdentityLookups(app: FastifyInstance, ctx: ServiceContext) {
  const ports = portsOf(ctx);
  const { preValidation, appOf } = proxyTokenFirst(ctx);
  app.post(`${BACKCHANNEL}/apikey`, { ...open, preValidation, schema: PROXY_APIKEY }, async (req) => {
    const a = appOf(req);
    const { Key } = body<{ Key: string }>(req, { Key: 'string' });
    let principal: Awaited<ReturnType<typeof authenticateApiKey>>;
    try {
      principal = await authenticateApiKey(ctx, Key);
    } catch (e) {
      // 401 on this channel means "your proxy token is bad"; a bad user key is a 403.
      if (e instanceof ApiError && e.status === 401) throw new ApiError('Forbidden', e.message);
      throw e;
    }
    if (!principal.scopes.has('user') && !principal.scopes.has('admin'))
      throw new ApiError('Forbidden', 'the API key needs scope user or admin to be used through the proxy');
    if (principal.userId === '') throw new ApiError('Forbidden', 'the API key acts for no user');
    const key = await ctx.store.get(APIKey, principal.keyId as string);
    const exp = timestampMs(String(key?.doc.ExpireTime ?? ''));
    const identity = await identityOf(
      ctx,
      principal.userId,
      Number.isFinite(exp) ? new Date(exp) : undefined,
    );
    await requireAppAccess(ctx, a, principal.userId, 0);
    return identity;
  });

  app.post(
    `${BACKCHANNEL}/session/exchange`,
    { ...open, preValidation, schema: PROXY_SESSION_EXCHANGE },
    async (req) => {
      const a = appOf(req);
      const { Code } = body<{ Code: string }>(req, { Code: 'string' });
      const sessionId = await redeemCode(ctx, a.id, Code);
      if (!sessionId) throw new ApiError('Forbidden', 'the sign-in code is invalid, expired or already used');
      const s = await needSessions(ports).byId(ctx, sessionId);
      if (!s) throw new ApiError('Forbidden', 'the session has ended');
      const identity = await identityOf(ctx, s.userId, s.expires, s.sessionId, s.integrityLevel);
      await requireAppAccess(ctx, a, s.userId, s.integrityLevel, s.location);
      return identity;
    },
  );

  app.post(
    `${BACKCHANNEL}/session/check`,
    { ...open, preValidation, schema: PROXY_SESSION_CHECK },
    async (req) => {
      const a = appOf(req);
      const { SessionID } = body<{ SessionID: string }>(req, { SessionID: 'string' });
      const s = SessionID ? await needSessions(ports).byId(ctx, SessionID) : undefined;
      if (!s || s.userId === '') throw new ApiError('Forbidden', 'the session has ended');
      const identity = await identityOf(ctx, s.userId, s.expires, s.sessionId, s.integrityLevel);
      await requireAppAccess(ctx, a, s.userId, s.integrityLevel, s.location);
      return identity;
    },
  );
}

/** May the user go through (group memberships), asked by the proxy for every request it gates. */
function registerAccessCheck(app: FastifyInstance, ctx: ServiceContext) {
  const ports = portsOf(ctx);
  app.post(`${BACKCHANNEL}/accesscheck`, { ...open, schema: PROXY_ACCESS_CHECK }, async (req) => {
    const a = await proxyApp(req, ctx);
    const b = body<AccessCheckRequest>(req, {
      UserID: 'string',
      Groups: 'strings',
      Op: 'string',
      Next: 'string',
    });
    if (b.Op !== 'and' && b.Op !== 'or')
      throw new ApiError('InvalidField', 'Op must be and or or', { field: 'Op' });
    const m = ports.memberships;
    if (!m) throw new ApiError('Unavailable', 'group memberships are not available in this service build');
    let level: number | undefined;
    let location: ProxySession['location'];
    const sid = (req.body as { SessionID?: unknown }).SessionID;
    if (typeof sid === 'string' && sid !== '' && ports.sessions) {
      const s: ProxySession | undefined = await ports.sessions.byId(ctx, sid);
      if (s && s.userId === b.UserID) {
        level = s.integrityLevel;
        location = s.location;
      }
    }
    // App isolation: an App asks only about users it serves (as it would hand their identity to
    // its proxy); about anyone else it learns nothing (every group 403, no request page) and its
    // question marks no use. The answer does not say which rule refused, not to tell a disabled
    // user from one outside the AccessGroups.
    const served = await appMayConcern(ctx, { ...a.doc, ID: a.id }, b.UserID, {
      level: level ?? 0,
      ...(location ? { location } : {}),
    });
    if (!served.Allowed) {
      req.log.info({ app: a.id, rule: served.Rule }, 'access check refused: the App does not serve the user');
      return {
        Satisfied: false,
        Results: [...new Set(b.Groups)].slice(0, 64).map((g) => ({ GroupID: g, StatusCode: 403 })),
      };
    }
    // Without a configured sign-in URL, the access-request page is on this service as the proxy reaches it.
    const origin = `${req.protocol}://${req.host}`;
    const r = await m.check(ctx, b.UserID, b.Groups, b.Op, {
      next: b.Next,
      integrityLevel: level,
      origin,
      ...(location ? { location } : {}),
    });
    for (const e of r.Results) if (e.StatusCode === 200) await m.markUsed(ctx, e.GroupID, b.UserID);
    return r;
  });
}

function registerProxySignin(app: FastifyInstance, ctx: ServiceContext) {
  const ports = portsOf(ctx);
  // Browser: the proxy sent it here to sign in. Signed in at the service: back to the proxy with a
  // one-time code. Not signed in: to the sign-in pages first, which return here.
  app.get(
    `${BACKCHANNEL}/signin`,
    { ...open, schema: PROXY_SIGNIN },
    async (req: FastifyRequest, reply: FastifyReply) => {
      const q = req.query as Record<string, unknown>;
      const appId = typeof q.app === 'string' ? q.app : '';
      const state = typeof q.state === 'string' ? q.state : '';
      const ret = typeof q.return === 'string' ? q.return : '';
      if (!/^[A-Za-z0-9_-]{16,128}$/.test(state))
        throw new ApiError('BadRequest', 'state is missing or malformed', { field: 'state' });
      const a = /^[a-z0-9]{1,64}$/.test(appId) ? await ctx.store.get(App, appId) : undefined;
      if (a?.doc.HaveProxyToken !== true)
        throw new ApiError('BadRequest', 'app does not name an App with a proxy', { field: 'app' });
      let target: URL;
      try {
        target = new URL(ret);
      } catch {
        throw new ApiError('BadRequest', 'return must be the proxy callback URL', { field: 'return' });
      }
      if (
        (target.protocol !== 'https:' && target.protocol !== 'http:') ||
        target.pathname !== PROXY_PATHS.callback ||
        target.search !== '' ||
        target.hash !== '' ||
        target.username !== '' ||
        target.password !== '' ||
        !(await appOrigins(ctx, a)).has(target.origin)
      )
        throw new ApiError(
          'BadRequest',
          `return must be <origin>${PROXY_PATHS.callback} on an origin of the App (its URL, AllowedOrigins or VirtualHosts)`,
          { field: 'return' },
        );
      const sessions = needSessions(ports);
      const s = await sessions.current(req, ctx);
      reply.header('Cache-Control', 'no-store');
      if (!s || s.userId === '') {
        // Every step of this sign-in applies the App's AccessGroups (the one sign-in completion).
        await signingInFor(req, reply, ctx, a.id);
        // Sign-in pages on this service come back to the path: no Host or X-Forwarded-* in the URL.
        const here = (await signinBase(ctx)).startsWith('/')
          ? req.url
          : `${req.protocol}://${req.host}${req.url}`;
        return reply.redirect(await sessions.signinPage(ctx, here), 302);
      }
      // Refused here with a page that says why, rather than by the exchange after the redirect.
      await requireAppAccess(ctx, a, s.userId, s.integrityLevel, s.location);
      target.searchParams.set('code', await issueCode(ctx, a.id, s.sessionId));
      target.searchParams.set('state', state);
      return reply.redirect(target.toString(), 302);
    },
  );
}
