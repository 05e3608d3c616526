import { ApiError } from '../../../core/errors.js';
import { User } from '../../../objects/user.js';
import { SYSTEM } from '../../../policy/actor.js';
import type { Doc } from '../../../schema/fields.js';
import { type ServiceContext, writerOf } from '../../../store/service.js';
import { userUsable } from '../../apikeys.js';
import { tenantDoc } from '../../integrity.js';
import { addLink, findLink, releaseLink, touchLink } from './store.js';

/** Who the provider says signed in: checked claims only (ID token or user info). */
export interface ProviderIdentity {
  issuer: string;
  subject: string;
  email: string;
  emailVerified: boolean;
  name: string;
  /** The level this sign-in gives (App.OAuth2.Level, raised by the ID token's acr/amr). */
  level: number;
}

/**
 * The user a provider identity signs in as. In order:
 * 1. a flow started to link (`linkUser`): the identity is linked to that user, unless it is
 *    already linked to another (409);
 * 2. the user the identity is linked to (by issuer and subject, never by e-mail);
 * 3. with `Tenant.FederationLinkByEmail` and an address the provider verified: the user who has
 *    that address, linked now;
 * 4. with `App.OAuth2.CreateUsers`: a new user, linked now;
 * otherwise 403 Account Not Linked (and, when a user has the address, how to link it).
 */
export async function resolveUser(
  ctx: ServiceContext,
  appId: string,
  who: ProviderIdentity,
  linkUser: string,
  createUsers: boolean,
): Promise<string> {
  let link = await findLink(ctx, who.issuer, who.subject);
  // A link to a user who no longer exists links nobody: the identity is free again. The row goes,
  // or linking it anew (below) would find it and refuse the identity as another user's.
  if (link && !(await ctx.store.get(User, link.user_id))) {
    await releaseLink(ctx, link);
    link = undefined;
  }
  const linkTo = async (userId: string) => {
    const made = await addLink(ctx, { ...who, userId, appId, email: who.email });
    if (made.user_id !== userId)
      throw new ApiError('Conflict', 'this identity at the provider is already linked to another user');
    return userId;
  };
  if (linkUser !== '') {
    if (link && link.user_id !== linkUser)
      throw new ApiError('Conflict', 'this identity at the provider is already linked to another user');
    if (link) {
      await touchLink(ctx, link.id);
      return linkUser;
    }
    return linkTo(linkUser);
  }
  if (link) {
    await touchLink(ctx, link.id);
    return link.user_id;
  }
  const holder = who.email !== '' ? await ctx.store.findByKey(User, 'Email', who.email) : undefined;
  if (holder) {
    const tenant = await tenantDoc(ctx);
    if (who.emailVerified && tenant.FederationLinkByEmail === true) return linkTo(holder.id);
    // The holder may be the user another first sign-in of this identity has just made and is
    // about to link (a double submit): that sign-in's link is waited for, briefly.
    if (createUsers && Date.now() - holder.createTime < JUST_MADE_MS) {
      const theirs = await linkSoon(ctx, who);
      if (theirs) return theirs;
    }
    throw new ApiError(
      'AccountNotLinked',
      'an account with this e-mail address exists but is not linked to this provider: sign in to it, then link the provider from Security settings',
    );
  }
  if (!createUsers)
    throw new ApiError('AccountNotLinked', 'no account is linked to this identity at the provider');
  const doc: Doc = {};
  // Only an address the provider verified becomes the new user's (the e-mail step finds users by it).
  if (who.email !== '' && who.emailVerified) doc.Email = who.email;
  if (who.name !== '') doc.Name = { FullName: who.name.slice(0, 256) };
  // Through the one write path, as the service: the user-write and group-membership scripts run
  // for a user the provider brought exactly as for one made through the API.
  let obj: { id: string } | undefined;
  try {
    ({ obj } = await writerOf(ctx).write({ actor: SYSTEM, type: User, op: 'create', body: doc }));
  } catch (e) {
    // Another first sign-in of this identity made the user with this address a moment ago.
    const theirs = e instanceof ApiError && e.status === 409 ? await linkSoon(ctx, who) : undefined;
    if (theirs) return theirs;
    throw e;
  }
  if (!obj) throw new ApiError('Internal', 'the new user was not stored');
  const made = await addLink(ctx, { ...who, userId: obj.id, appId, email: who.email });
  if (made.user_id === obj.id) return obj.id;
  // Another first sign-in of this identity linked its new user first: both are the same person
  // at the provider, so this one signs in as that user, and the user made here goes again.
  await writerOf(ctx)
    .write({ actor: SYSTEM, type: User, op: 'delete', id: obj.id })
    .catch((err: unknown) =>
      ctx.logger.warn(
        { err, user: obj.id },
        'a user made by a concurrent first sign-in could not be deleted',
      ),
    );
  return made.user_id;
}

/** A user made this recently may be another first sign-in's, not yet linked (resolveUser). */
const JUST_MADE_MS = 5_000;
/** How long a first sign-in waits for a concurrent one's link, and how often it looks. */
const LINK_WAIT_MS = 1_000;
const LINK_POLL_MS = 25;

/**
 * The user this identity is linked to within LINK_WAIT_MS, else undefined: what a concurrent
 * first sign-in of the same identity links, between making its user and linking it (milliseconds).
 */
async function linkSoon(ctx: ServiceContext, who: ProviderIdentity): Promise<string | undefined> {
  for (const until = Date.now() + LINK_WAIT_MS; ; ) {
    const link = await findLink(ctx, who.issuer, who.subject);
    if (link && (await ctx.store.get(User, link.user_id))) return link.user_id;
    if (Date.now() >= until) return undefined;
    await new Promise((resolve) => setTimeout(resolve, LINK_POLL_MS));
  }
}

/** The user must be allowed to sign in at all (not disabled, not suspended). */
export async function usableUser(ctx: ServiceContext, userId: string) {
  const user = await ctx.store.get(User, userId);
  if (!user || !userUsable(user.doc)) throw new ApiError('Forbidden', 'this user may not sign in');
  return user;
}
