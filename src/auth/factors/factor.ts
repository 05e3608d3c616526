import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { admitSecretCheck } from '../../core/hashing.js';
import { User } from '../../objects/user.js';
import type { Doc } from '../../schema/fields.js';
import type { ServiceContext } from '../../store/service.js';
import { userUsable } from '../apikeys.js';
import { type FactorKind, Level, provenLevel } from '../integrity.js';
import { type Intent, verifyIntent } from '../intents.js';
import { EMAIL_LOOKUP, takeRequest } from '../ratelimit.js';
import { intentDevice } from '../session/authenticator.js';
import { completeSignIn } from '../session/complete.js';
import {
  mutateRequestSession,
  replaceSession,
  requestSession,
  type Session,
  updateRequestSession,
} from '../session/sessions.js';
import { addressKey, attemptSucceeded, chargeAttempt, factorKey } from '../throttle.js';
import { rememberDevice, trustedTag } from './devices.js';
import type { EnrollStep, FactorWords, Identified, ProveStep, SettingsForm, SignInForm } from './steps.js';
import { reachableLevel } from './stepup.js';

/**
 * One way to prove something about the person at the keyboard, as a plug-in (like an Ory Kratos
 * strategy). It declares its steps and forms; the one flow (./flow.ts) serves the steps and the
 * pages draw the forms. A factor with endpoints of its own (a security key's challenge, a link
 * opened elsewhere) adds them in `register`. The list of factors is src/auth/factors/index.ts.
 */
export interface Factor {
  /** Name as recorded on sessions and offered in AuthResponse.Factors. */
  name: string;
  /** What kind of proof it is (decides the level it earns); none for steps that prove nothing. */
  kind?: FactorKind;
  /** Can this user use the factor now (so the sign-in pages offer it)? */
  enrolled?(user: Doc, secret: Doc): boolean;
  /** The API document's tag of its endpoints. */
  tag?: string;
  /** POST /auth/<name>: proven from typed fields, through the flow. */
  prove?: ProveStep;
  /** /auth/enroll/<name>...: set-up changes, through the flow. */
  enroll?: readonly EnrollStep[];
  /** How people read its name; needed by every factor a session can record. */
  words?: FactorWords;
  /** Offered on the sign-in page. */
  form?: SignInForm;
  /** Offered on the security settings page. */
  settings?: SettingsForm;
  /** Endpoints of its own, beyond the flow's. */
  register?(app: FastifyInstance, ctx: ServiceContext): void | Promise<void>;
  /**
   * Named JSON Schemas its routes' schemas refer to (ref('Name')), added to components.schemas of
   * /openapi.json. Its endpoints document themselves through their route schemas.
   */
  schemas?: Record<string, Record<string, unknown>>;
}

export type Form = Record<string, string | string[]>;

/** The request body as fields: form-encoded or, for API clients, a flat JSON object. */
export function formOf(req: FastifyRequest): Form {
  const b = req.body;
  if (b === undefined || b === null) return {};
  if (typeof b !== 'object' || Array.isArray(b))
    throw new ApiError('BadRequest', 'the body must be form fields (application/x-www-form-urlencoded)');
  const out: Form = {};
  for (const [k, v] of Object.entries(b as Record<string, unknown>)) {
    if (typeof v === 'string') out[k] = v;
    else if (typeof v === 'number' || typeof v === 'boolean') out[k] = String(v);
    else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) out[k] = v as string[];
    else throw new ApiError('InvalidField', `${k} must be a string`, { field: k });
  }
  return out;
}

/** One field; repeated fields are refused (400) where one is expected. */
export function field(form: Form, name: string, opts: { required: true; max?: number }): string;
export function field(
  form: Form,
  name: string,
  opts?: { required?: boolean; max?: number },
): string | undefined;
export function field(form: Form, name: string, opts: { required?: boolean; max?: number } = {}) {
  const v = form[name];
  if (Array.isArray(v)) throw new ApiError('InvalidField', `${name} may be given only once`, { field: name });
  if (v === undefined || v === '') {
    if (opts.required) throw new ApiError('InvalidField', `${name} is required`, { field: name });
    return undefined;
  }
  if (v.length > (opts.max ?? 1024))
    throw new ApiError('InvalidField', `${name} is too long`, { field: name });
  return v;
}

/** Does an intent belong to this session (or to no session, from this device)? */
export function intentBoundTo(i: Intent, s: Session | undefined): boolean {
  if (i.sid !== '') return s !== undefined && i.sid === s.id;
  return i.did === '' || (s !== undefined && i.did === intentDevice(s.deviceId));
}

/** The optional form intent: verified (400 when altered/expired) and bound to this session (else 400). */
export async function formIntent(ctx: ServiceContext, form: Form, s: Session | undefined) {
  const raw = field(form, 'intent', { max: 4096 });
  if (raw === undefined) return undefined;
  const i = await verifyIntent(ctx, raw);
  if (!intentBoundTo(i, s))
    throw new ApiError('InvalidIntent', 'the intent was issued to another session', { field: 'intent' });
  return i;
}

export type { Identified };

/**
 * Names the user signing in (the e-mail step): an unidentified session gets the user (new token),
 * a session of another user is replaced by a new one. 400 Account Missing for an unknown address.
 * Every way of asking comes through here, so every one counts against the e-mail lookup limit
 * of the client address (429 beyond it; docs/signin.md): it bounds how fast addresses can be tried.
 */
export async function identifyByEmail(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  raw: string,
): Promise<Session> {
  await takeRequest(ctx, EMAIL_LOOKUP, req.ip);
  const email = raw.trim().toLowerCase();
  const found = await ctx.store.findByKey(User, 'Email', email);
  if (!found) throw new ApiError('AccountMissing', 'no user has this e-mail address', { field: 'email' });
  if (!userUsable(found.doc)) throw new ApiError('Forbidden', 'this user may not sign in');
  const { session } = await requestSession(req, ctx);
  if (session && session.userId === found.id) return session;
  if (session && session.userId === '')
    return updateRequestSession(req, reply, ctx, { ...session, userId: found.id, factors: [] });
  return replaceSession(req, reply, ctx, found.id);
}

/**
 * The request's session and its user; 400 when no user has been named yet. A form may name the
 * user itself with an `email` field (the e-mail step folded into this one, for API clients).
 */
export async function identified(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  form?: Form,
): Promise<Identified> {
  const email = form ? field(form, 'email', { max: 254 }) : undefined;
  const session = email
    ? await identifyByEmail(req, reply, ctx, email)
    : (await requestSession(req, ctx)).session;
  if (!session || session.userId === '')
    throw new ApiError('BadRequest', 'no user is signing in: send POST /auth/email first', {
      field: 'email',
    });
  const user = await ctx.store.get(User, session.userId);
  if (!user || !userUsable(user.doc)) throw new ApiError('Forbidden', 'this user may not sign in');
  return { session, user, secret: await ctx.store.getSecret(User, session.userId) };
}

/**
 * Records a proven factor on the request's session (new level, new token when it changes). When
 * the session has now proven all its user's factors can prove, the device is remembered as one
 * where this user signs in (its own regulation counters from now on, see devices.ts).
 */
export async function proven(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  s: Session,
  name: string,
  data?: Partial<Session['data']>,
) {
  // The one sign-in completion: standing, the App's AccessGroups, the scripts, location, level.
  const script = await completeSignIn(ctx, s, {
    factor: name,
    client: { address: req.ip, userAgent: String(req.headers['user-agent'] ?? '') },
  });
  const after = await mutateRequestSession(req, reply, ctx, s.id, (cur) => {
    if (cur.userId !== s.userId)
      throw new ApiError('Conflict', 'the session changed user during this step; retry');
    return {
      ...cur,
      factors: cur.factors.includes(name) ? cur.factors : [...cur.factors, name],
      data: { ...cur.data, ...data, ...script },
    };
  });
  const level = provenLevel(after);
  if (level >= Level.OneFactor && after.deviceId !== '') {
    const user = await ctx.store.get(User, after.userId);
    const secret = await ctx.store.getSecret(User, after.userId);
    if (user && level >= (await reachableLevel(ctx, user.doc, secret)))
      await rememberDevice(ctx, after.userId, after.deviceId);
  }
  return after;
}

/** Who is answering a factor step, for regulation: the user and the device. */
export interface Attempt {
  userId: string;
  deviceId: string | undefined;
}
export const attemptOf = (who: Identified): Attempt => ({
  userId: who.user.id,
  deviceId: who.session.deviceId,
});

/**
 * Checks a secret under brute-force regulation (throttle.ts): the attempt is charged first to the
 * address and to this factor's counter for this user and device (429 while backing off, 503 if
 * the counters fail); a right answer clears that counter only, a wrong one is 403. While the
 * argon2id queue has all the checks it can serve in bounded time, 503 with Retry-After: 1 before
 * anything is charged (admitSecretCheck in src/core/hashing.ts).
 */
export async function regulated(
  req: FastifyRequest,
  ctx: ServiceContext,
  at: Attempt,
  factor: string,
  what: string,
  check: () => Promise<boolean>,
): Promise<void> {
  // Admitted before anything is counted: a check refused for load costs its owner no attempt.
  const release = admitSecretCheck();
  if (!release)
    throw new ApiError('Unavailable', 'too many sign-in checks are under way: try again in a second', {
      headers: { 'Retry-After': '1' },
    });
  try {
    const f = factorKey(at.userId, factor, await trustedTag(ctx, at.userId, at.deviceId));
    const a = addressKey(req.ip);
    await chargeAttempt(ctx, [a, f]);
    if (!(await check())) throw new ApiError('IncorrectCredential', `the ${what} is not correct`);
    await attemptSucceeded(ctx, f, a);
  } finally {
    release();
  }
}

/** A JSON object body (enrollment endpoints take JSON). */
export function jsonBody(req: FastifyRequest): Record<string, unknown> {
  const b = req.body ?? {};
  if (typeof b !== 'object' || Array.isArray(b))
    throw new ApiError('BadRequest', 'the body must be a JSON object');
  return b as Record<string, unknown>;
}

/** Routes of the sign-in flow take the session themselves: credentials are optional. */
export const FLOW = { config: { auth: 'optional' as const } };
