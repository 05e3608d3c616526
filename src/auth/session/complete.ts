import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { User } from '../../objects/user.js';
import { appIdServesUser } from '../../policy/apps.js';
import { all, allow, type Decision, deny } from '../../policy/decision.js';
import { userStanding } from '../../policy/users.js';
import type { Doc } from '../../schema/fields.js';
import { signInDecision } from '../../scripts/hooks.js';
import type { ServiceContext } from '../../store/service.js';
import { LEVEL_NAMES, levelOf, locationCap, requiredLevel, sessionFloor, tenantDoc } from '../integrity.js';
import { ensureSession, mutateRequestSession, type Session, type SessionData } from './sessions.js';

/*
 * The one sign-in completion (docs/security.md, "One sign-in completion"). Every way a session
 * gains a proof or a level (each factor's proof, an approval given on another device, federation,
 * vouching, a boost, an enrolment through an invitation) asks completeSignIn about the session
 * as it would be, before storing it; a refusal from any check refuses the step on every path.
 * The checks are small named functions, each returning a Decision with its rule.
 */

/** The rule names this file decides with (besides the user.* and app.* rules of src/policy). */
export const SIGNIN_RULES = ['signin.script', 'signin.no-app', 'signin.location', 'signin.level'] as const;

/** One step of a sign-in, as a path hands it over. */
export interface SignInStep {
  /** The factor just proven; '' when the step only lends a level (a boost). */
  factor: string;
  /** Level floors the step sets (a boost or vouch: BoostLevel; federation: FederatedLevel). */
  floor?: { BoostLevel?: number; FederatedLevel?: number };
  /** Where the proof came from, for the sign-in script; default: the session's own client. */
  client?: { address: string; userAgent: string };
}

/** What the checks add to the session: the script's required level and its reason. */
export type CompletionData = Pick<SessionData, 'ScriptLevel' | 'ScriptReason'>;

/** The session as it would be after the step: its factors, floors and the level they earn. */
function proposed(s: Session, step: SignInStep) {
  const factors =
    step.factor === '' || s.factors.includes(step.factor) ? s.factors : [...s.factors, step.factor];
  const data = {
    ...s.data,
    ...(step.floor?.BoostLevel !== undefined
      ? { BoostLevel: Math.max(s.data.BoostLevel ?? 0, step.floor.BoostLevel) }
      : {}),
    ...(step.floor?.FederatedLevel !== undefined ? { FederatedLevel: step.floor.FederatedLevel } : {}),
  };
  return { factors, data, level: levelOf(true, factors, sessionFloor(data)) };
}

// ---- the checks --------------------------------------------------------------------------------

/** The user may act: not disabled, merged away or suspended (rules user.*). */
export const userMayAct = (user: Doc | undefined): Decision => userStanding(user);

/**
 * A sign-in for an App (an OpenID client's authorization, a proxy's sign-in: SessionData.SignInApp)
 * needs the App to serve the user: an active membership of one of its AccessGroups when it has
 * any (app.access-groups). Only the membership: the group's level and location are the App's to
 * check at its door, since the session is still proving its level here.
 */
export async function appAdmits(ctx: ServiceContext, s: Session): Promise<Decision> {
  const appId = s.data.SignInApp;
  if (appId === undefined || appId === '') return allow('signin.no-app', 'the sign-in is not for an App');
  return appIdServesUser(ctx, appId, s.userId);
}

/** The sign-in scripts (docs/scripts.md, "sign-in"): a Deny refuses; RequireLevel is kept. */
export async function scriptAdmits(
  ctx: ServiceContext,
  user: Doc,
  s: Session,
  step: SignInStep,
  after: ReturnType<typeof proposed>,
): Promise<Decision & { data: CompletionData }> {
  const d = await signInDecision(ctx, {
    User: user,
    Factor: step.factor,
    Factors: after.factors,
    Level: after.level,
    Address: step.client?.address ?? s.data.Address ?? '',
    UserAgent: (step.client?.userAgent ?? s.data.UserAgent ?? '').slice(0, 512),
  });
  const data: CompletionData = {
    ScriptLevel: d.requireLevel > 0 ? d.requireLevel : undefined,
    ScriptReason: d.reason || undefined,
  };
  if (!d.allow) return { ...deny('signin.script', d.reason), data };
  const why = d.requireLevel > 0 ? `allowed; requires level ${d.requireLevel}` : 'allowed';
  return { ...allow('signin.script', `the sign-in scripts: ${why}`), data };
}

/**
 * The location policy (Tenant.LocationLevel, LocationRegions): the level the session may hold
 * where it reports to be. It lowers the level (applied again at every read, sessions.ts), it does
 * not refuse the step: the person may still report a location.
 */
export function locationPolicy(tenant: Doc, s: Session, level: number): Decision & { cap: number } {
  const cap = locationCap(tenant, s.data.Location);
  const held = Math.min(level, cap);
  return {
    ...allow(
      'signin.location',
      cap >= level ? 'the location policy leaves the level' : `the location policy caps the level at ${cap}`,
    ),
    cap: held,
  };
}

/**
 * The level policy: whether the session is now authorized (its level within the location cap
 * reaches the tenant's IntegrityRead and what a script requires). Not yet is not a refusal: more
 * factors may follow. The session authenticator applies the same rule to every request.
 */
export function levelPolicy(tenant: Doc, held: number, scriptLevel: number): Decision {
  const need = Math.max(requiredLevel(tenant, 'read'), scriptLevel);
  return allow(
    'signin.level',
    held >= need
      ? `authorized: level ${held} (${LEVEL_NAMES[held]}) reaches ${need}`
      : `not yet authorized: level ${held} of the ${need} needed; more factors may follow`,
  );
}

// ---- the completion ----------------------------------------------------------------------------

/** The error a refusal answers with: the script's own reason (403 Script Denied), else 403. */
function refusal(d: Decision): ApiError {
  if (d.Rule === 'signin.script') return new ApiError('ScriptDenied', d.Reason);
  if (d.Rule.startsWith('user.')) return new ApiError('Forbidden', `this user may not sign in (${d.Rule})`);
  return new ApiError('Forbidden', `${d.Reason} (${d.Rule})`);
}

/**
 * The one sign-in completion: applies to the session as the step would leave it the user's
 * standing, the App's AccessGroups (a sign-in for an App), the sign-in scripts, the location and
 * the level policy, in that order. Throws the refusal (403) of the first that refuses; else
 * returns what the step stores besides its own change (the script's ScriptLevel, ScriptReason).
 */
export async function completeSignIn(
  ctx: ServiceContext,
  s: Session,
  step: SignInStep,
): Promise<CompletionData> {
  const user = s.userId === '' ? undefined : await ctx.store.get(User, s.userId);
  const after = proposed(s, step);
  const tenant = await tenantDoc(ctx);
  let data: CompletionData = {};
  let held = after.level;
  const d = await all([
    () => userMayAct(user?.doc),
    () => appAdmits(ctx, s),
    async () => {
      const r = await scriptAdmits(ctx, user?.doc ?? {}, s, step, after);
      data = r.data;
      return r;
    },
    () => {
      const r = locationPolicy(tenant, s, after.level);
      held = r.cap;
      return r;
    },
    () => levelPolicy(tenant, held, data.ScriptLevel ?? 0),
  ]);
  if (!d.Allowed) {
    ctx.logger.info(
      { userId: s.userId, session: s.id, factor: step.factor, rule: d.Rule },
      `sign-in step refused: ${d.Reason}`,
    );
    throw refusal(d);
  }
  return data;
}

/**
 * Marks the request's session as signing in for an App (SessionData.SignInApp): the OpenID
 * provider's interaction and the proxy's sign-in call it before sending the person to the sign-in
 * pages, so every step of that sign-in applies the App's AccessGroups. Creates the session when
 * the browser has none yet.
 */
export async function signingInFor(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  appId: string,
): Promise<Session> {
  const s = await ensureSession(req, reply, ctx);
  if (s.data.SignInApp === appId) return s;
  return mutateRequestSession(req, reply, ctx, s.id, (cur) => ({
    ...cur,
    data: { ...cur.data, SignInApp: appId },
  }));
}
