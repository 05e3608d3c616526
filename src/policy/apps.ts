import { App } from '../objects/app.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { all, allow, type Decision, deny } from './decision.js';
import { type CountedFor, membershipCounts } from './memberships.js';
import { userStanding } from './users.js';

/*
 * App isolation (docs/security.md, "App isolation"): an App's credentials (its proxy token, its
 * OpenID Connect client, its provisioning agents) see and touch only the users the App serves.
 * Every place that hands an App a user, or a fact about one, asks appServesUser.
 */

/** The rule names this file decides with. */
export const APP_RULES = ['app.missing', 'app.open', 'app.access-groups', 'app.isolation'] as const;

type Ctx = Pick<ServiceContext, 'store'>;

/** The App's AccessGroups (empty: the App is open to every usable user). */
export const accessGroupsOf = (app: Doc): string[] =>
  Array.isArray(app.AccessGroups) ? (app.AccessGroups as unknown[]).map(String) : [];

/**
 * Does the user pass the App's AccessGroups: empty, or a membership of one of them that counts
 * for this session (memberships.ts: active, not overdue, at the group's level and location)?
 */
export async function accessGroupsAdmit(
  ctx: Ctx,
  app: Doc,
  userId: string,
  at: CountedFor = {},
): Promise<Decision> {
  const groups = accessGroupsOf(app);
  const appId = String(app.ID ?? '');
  if (groups.length === 0) return allow('app.open', `App ${appId} has no AccessGroups: every usable user`);
  for (const g of groups)
    if (await membershipCounts(ctx, g, userId, at))
      return allow('app.access-groups', `a membership of ${g}, an AccessGroup of App ${appId}, counts`);
  return deny(
    'app.access-groups',
    `App ${appId} is open to active members of its AccessGroups only (${groups.join(', ')})`,
  );
}

/**
 * Does the App serve this user: the user exists and is usable (not disabled, merged away or
 * suspended: users.ts) and passes the App's AccessGroups for this session (`at`; no level: no
 * session, as for provisioning). The one answer for the proxy back channel, the OpenID provider,
 * the sign-in completion of a sign-in for an App, and provisioning agents.
 */
export async function appServesUser(
  ctx: Ctx,
  app: Doc,
  userId: string,
  at: CountedFor = {},
): Promise<Decision> {
  const user = userId === '' ? undefined : await ctx.store.get(User, userId);
  return all([() => userStanding(user?.doc, at.now), () => accessGroupsAdmit(ctx, app, userId, at)]);
}

/** appServesUser for an App named by ID (a missing App serves nobody: `app.missing`). */
export async function appIdServesUser(
  ctx: Ctx,
  appId: string,
  userId: string,
  at: CountedFor = {},
): Promise<Decision> {
  const app = appId === '' ? undefined : await ctx.store.get(App, appId);
  if (!app) return deny('app.missing', `App ${appId} does not exist`);
  return appServesUser(ctx, { ...app.doc, ID: app.id }, userId, at);
}

/**
 * May an App's credential learn about, or act on, this user (the back channel's access checks
 * and use marks, a provisioning agent's changes)? Only when the App serves the user; the refusal
 * names `app.isolation` first, then the rule behind it.
 */
export async function appMayConcern(
  ctx: Ctx,
  app: Doc,
  userId: string,
  at: CountedFor = {},
): Promise<Decision> {
  const served = await appServesUser(ctx, app, userId, at);
  if (served.Allowed) return served;
  const appId = String(app.ID ?? '');
  return {
    Allowed: false,
    Rule: 'app.isolation',
    Reason: `App ${appId} does not serve this user: ${served.Reason}`,
    Chain: [
      ...served.Chain,
      { Rule: 'app.isolation', Allowed: false, Reason: `App ${appId} may not concern this user` },
    ],
  };
}
