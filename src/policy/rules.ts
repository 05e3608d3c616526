import { App } from '../objects/app.js';
import { objectTypes } from '../objects/registry.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import type { Principal } from '../schema/principal.js';
import type { Op } from '../schema/type.js';
import { findWhere } from '../store/find.js';
import type { ServiceContext } from '../store/service.js';
import { type Actor, isAppActor } from './actor.js';
import { appIdServesUser, appMayConcern } from './apps.js';
import { allow, type Decision, deny } from './decision.js';
import { access } from './grants.js';
import {
  actorPrivilege,
  ceiling,
  groupConfersPower,
  groupPrivilege,
  PRIVILEGE_OF,
  PRIVILEGED_ON_CREATE,
  userPrivilege,
} from './privilege.js';

/**
 * What an action is about. `doc` is the stored object when there is one; `body` the object as the
 * write would store it; `userId` the user acted on (a membership's, a vouch request's); `group`
 * the group of a membership action.
 */
export interface Target {
  kind: string;
  id: string;
  doc?: Doc | undefined;
  body?: Doc | undefined;
  userId?: string | undefined;
  group?: Doc | undefined;
  /** Facts a feature established about the actor and target (e.g. `approver`: the actor approves the group). */
  facts?: Readonly<Record<string, boolean>> | undefined;
  /** The integrity level of the session the question is asked for (App access); none: membership state only. */
  level?: number | undefined;
}

export type PolicyContext = Pick<ServiceContext, 'store'>;

/** One small named check; an action is a list of them (docs/security.md lists every rule). */
export interface Rule {
  name: string;
  check(ctx: PolicyContext, actor: Actor, target: Target): Decision | Promise<Decision>;
}

const typeOf = (kind: string) => objectTypes.find((t) => t.kind === kind);

const principalOnly = (actor: Actor, rule: string): Principal | Decision =>
  isAppActor(actor)
    ? deny(rule, "an App's credential acts only through the back channel and provisioning")
    : actor;

/** The scope matrix (each type's grants): may these credentials do `op` on this kind at all? */
export const grant = (op: Op): Rule => ({
  name: 'grant.scope',
  check(_ctx, actor, t) {
    const p = principalOnly(actor, 'grant.scope');
    if (!('scopes' in p)) return p;
    const a = access(p, t.kind, op);
    if (!a) return deny('grant.scope', `your credentials may not ${op} ${t.kind} objects`);
    const type = typeOf(t.kind);
    if (a === 'own' && t.doc && (!type?.ownerField || t.doc[type.ownerField] !== p.userId))
      return deny('grant.own', `${t.kind} ${t.id} does not exist`);
    return allow(
      'grant.scope',
      `${a === 'all' ? 'any' : 'its own'} ${t.kind} objects: the caller may ${op} them`,
    );
  },
});

/** Endpoints beyond CRUD name the scopes that may call them (admin holds them all). */
export const scopes = (...needed: string[]): Rule => ({
  name: 'grant.scope',
  check(_ctx, actor) {
    if (isAppActor(actor)) return deny('grant.scope', "an App's credential may not do this");
    if (actor.scopes.has('admin') || needed.some((s) => actor.scopes.has(s as never)))
      return allow('grant.scope', `the caller holds ${needed.length ? needed.join(' or ') : 'admin'}`);
    return deny('grant.scope', `this needs ${['admin', ...needed].join(' or ')} scope`);
  },
});

/** The privilege ceiling on the stored object (update, delete): the caller must cover what it stands for. */
export const ceilingOnStored: Rule = {
  name: 'privilege.ceiling',
  async check(ctx, actor, t) {
    const of = PRIVILEGE_OF[t.kind];
    if (!of || !t.doc || isAppActor(actor))
      return allow('privilege.ceiling', `${t.kind} stands for no privileges`);
    return ceiling(actorPrivilege(actor), await of(ctx, t.doc), `${t.kind} ${t.id}`);
  },
};

/** On create of a type that acts on a user's accounts: the caller must cover that user. */
export const ceilingOnCreate: Rule = {
  name: 'privilege.ceiling',
  async check(ctx, actor, t) {
    const of = PRIVILEGE_OF[t.kind];
    if (!of || !t.body || !PRIVILEGED_ON_CREATE.has(t.kind) || isAppActor(actor))
      return allow('privilege.ceiling', `creating a ${t.kind} acts on nobody's privileges`);
    return ceiling(actorPrivilege(actor), await of(ctx, t.body), `the user ${String(t.body.UserID ?? '')}`);
  },
};

/** The user acted on (a membership, a vouch, a disable): covered by the caller, unless it is the caller. */
export const ceilingOnUser: Rule = {
  name: 'privilege.ceiling',
  async check(ctx, actor, t) {
    const userId = t.userId ?? t.id;
    if (isAppActor(actor)) return deny('privilege.ceiling', "an App's credential may not act on users");
    if (actor.userId !== '' && actor.userId === userId)
      return allow('privilege.ceiling', 'the caller acts on itself');
    return ceiling(actorPrivilege(actor), await userPrivilege(ctx, userId), `user ${userId}`);
  },
};

/**
 * Putting someone into a group that confers power over its members (approval, colleague
 * vouching, an approver group): the caller must cover every member it would give power over.
 */
export const ceilingOnGroup: Rule = {
  name: 'privilege.group',
  async check(ctx, actor, t) {
    const group = t.group;
    if (!group || isAppActor(actor)) return allow('privilege.group', 'no group');
    if (actor.userId !== '' && actor.userId === t.userId)
      return allow('privilege.group', 'the caller acts on its own membership, as an approver allowed');
    if (!(await groupConfersPower(ctx, group)))
      return allow('privilege.group', `group ${String(group.ID)} gives its members no power over each other`);
    return ceiling(
      actorPrivilege(actor),
      await groupPrivilege(ctx, String(group.ID)),
      `group ${String(group.ID)} (its members and those it approves)`,
    );
  },
};

/** An active administrator: Admin, Active and not Disabled. */
export const activeAdmin = (doc: Doc | undefined) =>
  !!doc && doc.Admin === true && doc.Active === true && doc.Disabled !== true && !doc.MergedInto;

/**
 * The last active administrator stays: a change that would leave none (demotion, deactivation,
 * disabling, deletion, merging away) is refused with 409, whoever asks.
 */
export const keepsAnAdministrator = (effect: 'update' | 'remove'): Rule => ({
  name: 'admin.last-active',
  async check(ctx, _actor, t) {
    if (t.kind !== User.kind || !activeAdmin(t.doc))
      return allow('admin.last-active', 'the change does not end an active administrator');
    if (effect === 'update' && activeAdmin(t.body))
      return allow('admin.last-active', 'the administrator stays active');
    for (const u of await findWhere(ctx.store, User, { Admin: true, Active: true, Disabled: false }))
      if (String(u.ID) !== t.id && activeAdmin(u))
        return allow('admin.last-active', `another active administrator remains (${String(u.ID)})`);
    return deny('admin.last-active', `user ${t.id} is the last active administrator; make another one first`);
  },
});

/**
 * Runs a change of a user that is now an active administrator (its decision and its write) under
 * the 'administrators' lock, so two changes at once that would each end one of the last two
 * administrators cannot both see the other remain: the second decides after the first committed.
 * Changes of any other user run at once. `change` learns whether it holds the lock: if so, what it
 * loaded before may be stale, and it loads again.
 */
export function whileAdministratorsHeld<T>(
  ctx: ServiceContext,
  kind: string,
  stored: Doc | undefined,
  change: (held: boolean) => Promise<T>,
): Promise<T> {
  return kind === User.kind && activeAdmin(stored)
    ? ctx.store.locks.run('administrators', () => change(true))
    : change(false);
}

/** A user may not disable itself (it would lock itself out mid-request). */
export const notSelf: Rule = {
  name: 'user.not-self',
  check(_ctx, actor, t) {
    if (!isAppActor(actor) && actor.userId !== '' && actor.userId === t.id)
      return deny('user.not-self', 'you cannot disable yourself');
    return allow('user.not-self', 'the caller acts on another user');
  },
};

/**
 * Vouching someone in needs a voucher at least as privileged as the person vouched for: the
 * voucher's own standing (Admin and the scopes of its keys), not the session's level.
 */
export const voucherCovers: Rule = {
  name: 'vouch.ceiling',
  async check(ctx, actor, t) {
    if (isAppActor(actor) || actor.userId === '') return deny('vouch.ceiling', 'only a user may vouch');
    const requester = t.userId ?? '';
    const voucher = await userPrivilege(ctx, actor.userId);
    const d = ceiling(voucher, await userPrivilege(ctx, requester), `user ${requester}`);
    return { ...d, Rule: 'vouch.ceiling', Chain: d.Chain.map((s) => ({ ...s, Rule: 'vouch.ceiling' })) };
  },
};

/**
 * The user's own records (sessions, factors, devices, keys, reference video): the user itself,
 * or a caller holding one of `needed` (admin always).
 */
export const selfOr = (...needed: string[]): Rule => ({
  name: 'grant.self-or-scope',
  check(_ctx, actor, t) {
    if (isAppActor(actor)) return deny('grant.self-or-scope', "an App's credential may not do this");
    if (actor.userId !== '' && actor.userId === t.userId)
      return allow('grant.self-or-scope', 'the caller acts on its own user');
    if (actor.scopes.has('admin') || needed.some((s) => actor.scopes.has(s as never)))
      return allow(
        'grant.self-or-scope',
        `the caller holds ${needed.length ? needed.join(' or ') : 'admin'}`,
      );
    return deny(
      'grant.self-or-scope',
      `only the user itself or a caller with ${['admin', ...needed].join(' or ')} scope may do this`,
    );
  },
});

/** A fact the feature established (such as being the group's approver), or one of `needed`. */
export const factOr = (fact: string, ...needed: string[]): Rule => ({
  name: `grant.${fact}-or-scope`,
  check(_ctx, actor, t) {
    if (isAppActor(actor)) return deny(`grant.${fact}-or-scope`, "an App's credential may not do this");
    if (t.facts?.[fact] === true) return allow(`grant.${fact}-or-scope`, `the caller is ${fact} of it`);
    if (actor.scopes.has('admin') || needed.some((s) => actor.scopes.has(s as never)))
      return allow(`grant.${fact}-or-scope`, `the caller holds ${needed.join(' or ')}`);
    return deny(
      `grant.${fact}-or-scope`,
      `this needs ${['admin', ...needed].join(' or ')} scope, or to be its ${fact}`,
    );
  },
});

/** Does the App (the target) serve the user: standing, then its AccessGroups (src/policy/apps.ts). */
export const appServes: Rule = {
  name: 'app.access-groups',
  check: (ctx, _actor, t) =>
    appIdServesUser(ctx, t.id, t.userId ?? '', t.level === undefined ? {} : { level: t.level }),
};

/** An App's own credential may learn about, or act on, only the users its App serves. */
export const appIsolation: Rule = {
  name: 'app.isolation',
  async check(ctx, actor, t) {
    if (!isAppActor(actor)) return deny('app.isolation', "only an App's own credential asks this");
    const app = await ctx.store.get(App, actor.appId);
    if (!app) return deny('app.missing', `App ${actor.appId} does not exist`);
    return appMayConcern(ctx, { ...app.doc, ID: app.id }, t.userId ?? t.id);
  },
};
