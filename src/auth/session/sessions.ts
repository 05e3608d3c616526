import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { newId } from '../../store/objects.js';
import { runBesideOtherWriters } from '../../store/otherwriters.js';
import { perService, type ServiceContext, stateOf } from '../../store/service.js';
import { Level, levelOf, locationCap, sessionFloor, tenantDoc } from '../integrity.js';
import { clearSessionCookie, serviceCookies, setDeviceCookie, setSessionCookie } from './cookies.js';
import { authDb, type SessionsTable } from './db.js';
import {
  deleteSessionRow,
  insertSessionRow,
  type SessionSet,
  sessionRowById,
  sessionRowByToken,
  sessionUserOf,
  sweepEnded,
  touchSessionRow,
  writeSessionRow,
} from './rows.js';

type Ctx = Pick<ServiceContext, 'db' | 'store' | 'state'>;

export interface SessionData {
  /** Last reported position (POST /auth/location). */
  Location?: { Latitude: number; Longitude: number; Time: string };
  UserAgent?: string;
  Address?: string;
  /** A pending WebAuthn sign-in challenge (POST /auth/u2f/start; single use, see factors/u2f). */
  WebAuthn?: { Challenge: string; Expires: number; UserID: string; Purpose: 'signin' | 'register' };
  /** A valid activation code was presented in this session. */
  ActivationCode?: boolean;
  /** Level granted by a boost from another session (the level never drops below it). */
  BoostLevel?: number;
  /** Level given by a sign-in through an upstream identity provider (src/auth/factors/oauth2rp/). */
  FederatedLevel?: number;
  /** The session's token changed server-side (boost): rotate again at the holder's next request. */
  RotatePending?: boolean;
  /** A sign-in script requires this level before the session is authorized (docs/scripts.md). */
  ScriptLevel?: number;
  /** The script's reason for ScriptLevel, shown to the person (AuthResponse.Reason). */
  ScriptReason?: string;
  /**
   * The App this sign-in is for (an OpenID client's authorization or a proxy's sign-in started
   * it): every step applies the App's AccessGroups (complete.ts).
   */
  SignInApp?: string;
}

export interface Session {
  id: string;
  userId: string;
  deviceId: string;
  level: number;
  factors: string[];
  data: SessionData;
  createTime: number;
  lastSeen: number;
  expireTime: number;
}

const TOKEN = /^[A-Za-z0-9_-]{43}$/;
const DEVICE = /^[A-Za-z0-9_-]{22}$/;
/** last_seen is written at most this often, so reads do not all become writes. */
const TOUCH_MS = 30_000;

/**
 * Emits 'change' with {userId, sessionId, deleted} after every session write of this service (for
 * the event stream's Auth and OtherSession kinds). Other instances' writes are not seen here, nor
 * another service's in the same process: the bus is the service's (src/store/service.ts).
 */
const SESSION_EVENTS = perService<EventEmitter, Ctx>('session events', () => {
  const bus = new EventEmitter();
  bus.setMaxListeners(0);
  return bus;
});
export const sessionEventsOf = (ctx: Ctx): EventEmitter => stateOf(ctx, SESSION_EVENTS);
const changed = (ctx: Ctx, userId: string, sessionId: string, deleted = false) => {
  if (userId !== '') sessionEventsOf(ctx).emit('change', { userId, sessionId, deleted });
};

/** One creation in this many also deletes what has ended (sweepEnded). */
const SWEEP_EVERY = 50;

export const newToken = () => randomBytes(32).toString('base64url');
export const newDeviceId = () => randomBytes(16).toString('base64url');
export const hashToken = (token: string) => createHash('sha256').update(token).digest('base64url');

function toSession(row: SessionsTable): Session {
  return {
    id: row.id,
    userId: row.user_id,
    deviceId: row.device_id,
    level: Number(row.level),
    factors: JSON.parse(row.factors) as string[],
    data: JSON.parse(row.data) as SessionData,
    createTime: Number(row.create_time),
    lastSeen: Number(row.last_seen),
    expireTime: Number(row.expire_time),
  };
}

async function lifetimes(ctx: Ctx) {
  const t = await tenantDoc(ctx);
  const idle = typeof t.SessionIdleSeconds === 'number' ? t.SessionIdleSeconds : 8 * 3600;
  const max = typeof t.SessionMaxSeconds === 'number' ? t.SessionMaxSeconds : 7 * 86400;
  return { idleMs: idle * 1000, maxMs: max * 1000, tenant: t };
}

/**
 * The level a session holds now: the stored level (from its factors and boosts) within the
 * tenant's location policy (locationCap). Applied whenever a session is read or written, so a
 * policy change or a new location report takes effect at once; the stored level stays uncapped.
 */
function withinPolicy(s: Session, tenant: Record<string, unknown>): Session {
  const cap = locationCap(tenant, s.data.Location);
  return s.level > cap ? { ...s, level: cap } : s;
}
const effective = async (ctx: Ctx, s: Session) => withinPolicy(s, await tenantDoc(ctx));

export async function createSession(
  ctx: Ctx,
  init: { deviceId: string; userId?: string; data?: SessionData },
): Promise<{ session: Session; token: string }> {
  const { maxMs } = await lifetimes(ctx);
  const now = Date.now();
  const token = newToken();
  const userId = init.userId ?? '';
  const row: SessionsTable = {
    id: newId(now),
    token_hash: hashToken(token),
    user_id: userId,
    device_id: init.deviceId,
    level: userId === '' ? Level.None : Level.Identified,
    factors: '[]',
    data: JSON.stringify(init.data ?? {}),
    create_time: now,
    last_seen: now,
    expire_time: now + maxMs,
  };
  await insertSessionRow(ctx, row);
  changed(ctx, userId, row.id);
  if (Math.random() * SWEEP_EVERY < 1) {
    const { idleMs } = await lifetimes(ctx);
    await sweepEnded(ctx, idleMs).catch(() => undefined);
  }
  return { session: toSession(row), token };
}

/** The live session a cookie token names, or undefined (unknown, idle too long, or past its end). */
export async function sessionByToken(ctx: Ctx, token: string): Promise<Session | undefined> {
  if (!TOKEN.test(token)) return undefined;
  const row = await sessionRowByToken(ctx, hashToken(token));
  if (!row) return undefined;
  const s = toSession(row);
  const { idleMs, tenant } = await lifetimes(ctx);
  const now = Date.now();
  if (now >= s.expireTime || now - s.lastSeen >= idleMs) {
    await deleteSessionRow(ctx, s.id);
    return undefined;
  }
  if (now - s.lastSeen >= TOUCH_MS) {
    await touchSessionRow(ctx, s.id, now);
    s.lastSeen = now;
  }
  return withinPolicy(s, tenant);
}

export async function sessionById(ctx: Ctx, id: string): Promise<Session | undefined> {
  const row = await sessionRowById(ctx, id);
  if (!row) return undefined;
  const s = toSession(row);
  const { idleMs, tenant } = await lifetimes(ctx);
  const now = Date.now();
  return now >= s.expireTime || now - s.lastSeen >= idleMs ? undefined : withinPolicy(s, tenant);
}

export async function listSessions(ctx: Ctx, userId: string): Promise<Session[]> {
  const rows = await authDb(ctx)
    .selectFrom('sessions')
    .selectAll()
    .where('user_id', '=', userId)
    .orderBy('create_time')
    .execute();
  const { idleMs } = await lifetimes(ctx);
  const now = Date.now();
  return rows.map(toSession).filter((s) => now < s.expireTime && now - s.lastSeen < idleMs);
}

export async function deleteSession(ctx: Ctx, id: string): Promise<boolean> {
  const userId = await sessionUserOf(ctx, id);
  const done = (await deleteSessionRow(ctx, id)) > 0;
  if (done && userId !== undefined) changed(ctx, userId, id, true);
  return done;
}

/** Ends every session of a user (e.g. after an administrator resets their credentials); how many. */
export async function deleteUserSessions(ctx: Ctx, userId: string, except?: string): Promise<number> {
  let q = authDb(ctx).deleteFrom('sessions').where('user_id', '=', userId);
  if (except) q = q.where('id', '!=', except);
  const r = await q.executeTakeFirst();
  changed(ctx, userId, '', true);
  return Number(r.numDeletedRows);
}

/**
 * Writes a session's new state. The level is recomputed from the factors; when it changes
 * (or `rotate` is asked), the cookie token is replaced and the new token returned (fixation).
 */
export async function saveSession(
  ctx: Ctx,
  s: Session,
  opts: { rotate?: boolean } = {},
): Promise<{ session: Session; token?: string }> {
  const { level, token, set } = sessionUpdate(s, s.level, opts.rotate);
  if ((await writeSessionRow(ctx, s.id, set)) === 0) throw new Error('session vanished');
  changed(ctx, s.userId, s.id);
  return { session: await effective(ctx, { ...s, level }), token };
}

/**
 * The row update for a session about to be stored: its level recomputed from its factors, and a
 * new token when the level changed from `previousLevel` (fixation defence) or `rotate` says so.
 */
function sessionUpdate(s: Session, previousLevel: number, rotate: boolean | undefined) {
  const level = levelOf(s.userId !== '', s.factors, sessionFloor(s.data));
  const token = (rotate ?? level !== previousLevel) ? newToken() : undefined;
  const set: SessionSet = {
    user_id: s.userId,
    level,
    factors: JSON.stringify(s.factors),
    data: JSON.stringify(s.data),
  };
  if (token) set.token_hash = hashToken(token);
  return { level, token, set };
}

/**
 * Read-modify-write of a session in one transaction (row locked on PostgreSQL; SQLite runs one
 * writer at a time), so parallel steps of one sign-in do not lose each other's factors. The level
 * is recomputed; the token is replaced when the level changes (or `rotate` says so).
 */
export async function mutateSession(
  ctx: Ctx,
  id: string,
  fn: (current: Session) => Session,
  opts: { rotate?: boolean } = {},
): Promise<{ session: Session; token?: string } | undefined> {
  // On SQLite, run again while another process's write stands in its way (otherwriters.ts).
  const result = await runBesideOtherWriters(ctx.db, () =>
    authDb(ctx)
      .transaction()
      .execute(async (tx) => {
        const row = await sessionRowById(ctx, id, tx);
        if (!row) return undefined;
        const current = toSession(row);
        const s = fn(current);
        const { level, token, set } = sessionUpdate(s, current.level, opts.rotate);
        await writeSessionRow(ctx, id, set, tx);
        return { session: { ...s, level }, token };
      }),
  );
  if (!result) return undefined;
  changed(ctx, result.session.userId, id);
  return { ...result, session: await effective(ctx, result.session) };
}

// ---- per-request state ------------------------------------------------------------------------

interface RequestState {
  session: Session | undefined;
  /** A session cookie was sent but names no live session. */
  stale: boolean;
  deviceId: string | undefined;
}
// module-state: a per-request side table (the session looked up once per request); gone with the request.
const states = new WeakMap<FastifyRequest, RequestState>();
/** New tokens found while authenticating (no reply there yet); sent by the onSend hook. */
// module-state: a per-request side table (tokens to set on the reply); gone with the request.
export const pendingCookies = new WeakMap<FastifyRequest, string>();

/** The request's session (looked up once per request) and device ID, from their cookies. */
export async function requestSession(req: FastifyRequest, ctx: Ctx): Promise<RequestState> {
  let st = states.get(req);
  if (st) return st;
  const { session: token, device } = serviceCookies(req);
  let session = token ? await sessionByToken(ctx, token) : undefined;
  if (session?.data.RotatePending) {
    // Boosted from another session: its level changed, so its holder gets a new token now.
    const { RotatePending: _, ...data } = session.data;
    const saved = await saveSession(ctx, { ...session, data }, { rotate: true });
    session = saved.session;
    if (saved.token) pendingCookies.set(req, saved.token);
  }
  st = {
    session,
    stale: token !== undefined && token !== '' && !session,
    deviceId: device && DEVICE.test(device) ? device : undefined,
  };
  states.set(req, st);
  return st;
}

/** The request's session, created (level 0, with a device cookie) when there is none. */
export async function ensureSession(req: FastifyRequest, reply: FastifyReply, ctx: Ctx): Promise<Session> {
  const st = await requestSession(req, ctx);
  if (st.session) return st.session;
  return startSession(req, reply, ctx, st, '');
}

/** Creates a session on the request's device (a new device cookie when it has none) and sends its cookie. */
async function startSession(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: Ctx,
  st: Awaited<ReturnType<typeof requestSession>>,
  userId: string,
  carried: SessionData = {},
): Promise<Session> {
  const deviceId = st.deviceId ?? newDeviceId();
  if (!st.deviceId) setDeviceCookie(req, reply, deviceId);
  const data = { ...clientData(req), ...carried };
  const { session, token } = await createSession(ctx, { deviceId, userId, data });
  setSessionCookie(req, reply, token);
  st.session = session;
  st.deviceId = deviceId;
  return session;
}

/** Replaces the request's session with a new one (different user, or after sign-out). */
export async function replaceSession(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: Ctx,
  userId: string,
): Promise<Session> {
  const st = await requestSession(req, ctx);
  // A sign-in for an App stays one when the person names another user (complete.ts).
  const app = st.session?.data.SignInApp;
  if (st.session) await deleteSession(ctx, st.session.id);
  return startSession(req, reply, ctx, st, userId, app ? { SignInApp: app } : {});
}

/** Saves the request's own session; a new token (level change) goes out in the cookie at once. */
export async function updateRequestSession(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: Ctx,
  s: Session,
): Promise<Session> {
  const { session, token } = await saveSession(ctx, s);
  if (token) {
    pendingCookies.delete(req);
    setSessionCookie(req, reply, token);
  }
  const st = states.get(req);
  if (st) st.session = session;
  return session;
}

/** mutateSession for the request's own session; a new token goes out in the cookie at once. */
export async function mutateRequestSession(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: Ctx,
  id: string,
  fn: (current: Session) => Session,
): Promise<Session> {
  const r = await mutateSession(ctx, id, fn);
  if (!r) throw new ApiError('Unauthenticated', 'the session has ended; sign in again');
  if (r.token) {
    pendingCookies.delete(req);
    setSessionCookie(req, reply, r.token);
  }
  const st = states.get(req);
  if (st) st.session = r.session;
  return r.session;
}

/** Ends the request's session (sign-out); the device cookie stays. */
export async function endRequestSession(req: FastifyRequest, reply: FastifyReply, ctx: Ctx): Promise<void> {
  const st = await requestSession(req, ctx);
  if (st.session) await deleteSession(ctx, st.session.id);
  clearSessionCookie(req, reply);
  st.session = undefined;
}

function clientData(req: FastifyRequest): SessionData {
  const ua = req.headers['user-agent'];
  return { UserAgent: typeof ua === 'string' ? ua.slice(0, 256) : '', Address: req.ip };
}
