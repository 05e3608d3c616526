import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { User } from '../../objects/user.js';
import { decide } from '../../policy/decide.js';
import type { Doc } from '../../schema/fields.js';
import { perService, type ServiceContext, stateOf } from '../../store/service.js';
import {
  type FactorKind,
  LEVEL_NAMES,
  Level,
  levelOfKinds,
  provenLevel,
  requiredLevel,
  tenantDoc,
} from '../integrity.js';
import { insufficientIntegrity } from '../session/authenticator.js';
import { completeSignIn } from '../session/complete.js';
import { deleteUserSessions, mutateRequestSession, requestSession } from '../session/sessions.js';

/**
 * The one rule for changing credentials (docs/signin.md, "Changing credentials"); every
 * enrolment endpoint of every factor calls credentialChange() before it writes anything.
 *
 * - API keys: only an administrator's explicit reset, an admin-scope key naming the user with
 *   `?user=<id>`. Any other key is 403, whatever its scope: a key is not a proof of the person,
 *   so a stolen read-only key must not become a password.
 * - A session, for its own user: a proven level (the activation code excluded) of at least the
 *   tenant's IntegrityCredentials and the level the user's enrolled factors reach. Whoever changes
 *   or removes a factor has proven at least as much as that factor can prove; removing the last
 *   factor of a kind is covered by the same rule. Else 401 with an intent for that level.
 * - A session that redeemed an activation code may add factors the user does not have yet while
 *   the user is being enrolled (not active, or no factor yet): the invitation's one purpose. The
 *   factor it sets counts as proven in that session.
 * - An administrator's session, for another user: IntegrityAdmin (checked again here, whatever
 *   the path looked like to the classifier), and the change ends that user's sessions.
 */
export type CredentialOp = 'set' | 'remove';

export interface CredentialChange {
  userId: string;
  /** An administrator's reset: the target's sessions end afterwards. */
  reset: boolean;
  /** Allowed by an enrolment invitation: the new factor is recorded as proven afterwards. */
  enrolment: boolean;
  /** The factor exists already (replacing or removing): the user's other sessions end. */
  existing: boolean;
}

/**
 * The sign-in factors, handed over once by the registry (./index.ts). The registry imports every
 * factor and the factors import this file, so it cannot import the registry without a cycle.
 */
// module-state: the factor registry (code, not data: the same for every service), handed over once as src/auth/factors/index.ts loads.
let registered: readonly EnrollableFactor[] | undefined;

/** What step-up needs of a factor: the registry's Factor (./factor.ts) has these fields. */
interface EnrollableFactor {
  name: string;
  kind?: FactorKind | undefined;
  enrolled?(user: Doc, secret: Doc): boolean;
}

export function registerFactors(list: readonly EnrollableFactor[]): void {
  registered = list;
}

/**
 * A service's sign-in factors: the registry's list unless its composition root gave another
 * (src/auth/factors/index.ts, `useFactors`). Every factor a service serves, offers and counts
 * comes from here.
 */
export const FACTOR_LIST = perService<readonly EnrollableFactor[]>('sign-in factors', () => {
  // Fail closed: without the list, every step-up would ask for too little.
  if (!registered)
    throw new Error('the sign-in factors are not registered (import src/auth/factors/index.ts)');
  return registered;
});

/** The factors a user has set up, with their kinds (the sign-in factors' own `enrolled`). */
export async function enrolledFactors(ctx: ServiceContext, user: Doc, secret: Doc) {
  return stateOf(ctx, FACTOR_LIST).filter((f) => f.kind !== undefined && f.enrolled?.(user, secret) === true);
}

/** The best level this user's enrolled factors can reach (Identified when none). */
export async function reachableLevel(ctx: ServiceContext, user: Doc, secret: Doc): Promise<number> {
  return levelOfKinds((await enrolledFactors(ctx, user, secret)).map((f) => f.kind));
}

function queryUser(req: FastifyRequest): string | undefined {
  const given = ((req.query ?? {}) as Record<string, unknown>).user;
  if (Array.isArray(given))
    throw new ApiError('InvalidField', 'user may be given only once', { field: 'user' });
  return typeof given === 'string' && given !== '' ? given : undefined;
}

async function existingUser(ctx: ServiceContext, userId: string) {
  const user = await ctx.store.get(User, userId);
  if (!user) throw new ApiError('NotFound', `User ${userId} does not exist`);
  return user;
}

export async function credentialChange(
  req: FastifyRequest,
  ctx: ServiceContext,
  factor: string,
  op: CredentialOp,
  /** The user named by the path (e.g. PUT /users/:id/reference-video) instead of `?user=`. */
  target?: string,
): Promise<CredentialChange> {
  const p = req.principal;
  if (!p) throw new ApiError('Unauthenticated', 'authentication required');
  const named = target ?? queryUser(req);
  if (p.via !== 'session') {
    const reset =
      named !== undefined &&
      (await decide(ctx, p, 'User.credentials-reset', { kind: 'User', id: named, userId: named })).Allowed;
    if (!reset)
      throw new ApiError(
        'Forbidden',
        "API keys change credentials only as an administrator's reset (admin scope, ?user=<id>); people change their own in a signed-in session",
      );
    await existingUser(ctx, named);
    return { userId: named, reset: true, enrolment: false, existing: true };
  }
  const tenant = await tenantDoc(ctx);
  const { session } = await requestSession(req, ctx);
  if (!session || session.id !== p.sessionId)
    throw new ApiError('Unauthenticated', 'authentication required');
  const has = provenLevel(session);
  const userId = named ?? p.userId;
  if (userId !== p.userId) {
    const may = await decide(ctx, p, 'User.credentials-reset', { kind: 'User', id: userId, userId });
    if (!may.Allowed)
      throw new ApiError('Forbidden', "only administrators may change another user's credentials", {
        rule: may.Rule,
      });
    const need = requiredLevel(tenant, 'admin');
    if (has < need)
      throw await insufficientIntegrity(
        req,
        ctx,
        need,
        `changing another user's credentials needs integrity level ${need}`,
      );
    await existingUser(ctx, userId);
    return { userId, reset: true, enrolment: false, existing: true };
  }
  const user = await existingUser(ctx, userId);
  const secret = await ctx.store.getSecret(User, userId);
  const enrolled = await enrolledFactors(ctx, user.doc, secret);
  const reach = levelOfKinds(enrolled.map((f) => f.kind));
  const existing = op === 'remove' || enrolled.some((f) => f.name === factor);
  const need = Math.max(requiredLevel(tenant, 'credentials'), reach);
  if (has >= need) return { userId, reset: false, enrolment: false, existing };
  const enrolling = user.doc.Active !== true || reach <= Level.Identified;
  if (op === 'set' && !existing && enrolling && session.data.ActivationCode === true)
    return { userId, reset: false, enrolment: true, existing: false };
  throw await insufficientIntegrity(
    req,
    ctx,
    need,
    `changing ${factor} needs integrity level ${need} (${LEVEL_NAMES[need]}), what this user's factors prove; the session has proven ${has}: prove another factor first`,
  );
}

/**
 * After the change is stored: an administrator's reset ends the target's sessions; replacing or
 * removing one's own factor ends one's other sessions (whoever held them may not have known the
 * new secret); a factor enrolled through an invitation counts as proven in this session.
 */
export async function credentialChanged(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  change: CredentialChange,
  factor: string,
): Promise<void> {
  if (change.reset) {
    await deleteUserSessions(ctx, change.userId);
    return;
  }
  const { session } = await requestSession(req, ctx);
  if (!session) return;
  if (change.existing) await deleteUserSessions(ctx, change.userId, session.id);
  if (!change.enrolment) return;
  // Counting the new factor is a sign-in step: the one completion decides. Refused, the factor
  // stays enrolled (the change is stored) but this session does not count it as proven.
  let checked: Awaited<ReturnType<typeof completeSignIn>>;
  try {
    checked = await completeSignIn(ctx, session, {
      factor,
      client: { address: req.ip, userAgent: String(req.headers['user-agent'] ?? '') },
    });
  } catch (e) {
    if (e instanceof ApiError && e.status === 403) return;
    throw e;
  }
  await mutateRequestSession(req, reply, ctx, session.id, (cur) => ({
    ...cur,
    factors: cur.factors.includes(factor) ? cur.factors : [...cur.factors, factor],
    data: { ...cur.data, ...checked },
  }));
}
