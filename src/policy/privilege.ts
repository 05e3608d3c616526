import { AccountChange } from '../objects/accountchange.js';
import { APIKey } from '../objects/apikey.js';
import { Group } from '../objects/group.js';
import { Membership } from '../objects/membership.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import type { Principal } from '../schema/principal.js';
import type { Scope } from '../schema/type.js';
import { findWhere } from '../store/find.js';
import type { ServiceContext } from '../store/service.js';
import { allow, type Decision, deny } from './decision.js';

/**
 * Privilege: the scopes a principal stands for. An administrator stands for `admin`, which covers
 * every scope; a user also stands for the scopes of the API keys it owns (disabling it revokes
 * them), except `user`, which every user has. The privilege ceiling (docs/security.md) compares
 * these sets: nobody may cause anything that gives power over a principal whose privilege
 * their own does not cover.
 */
export type Privilege = ReadonlySet<Scope>;

const scopesOf = (key: Doc): Scope[] => (Array.isArray(key.Scopes) ? (key.Scopes as Scope[]) : []);

/** Does `held` cover every scope of `needed` (admin covers all)? */
export const covers = (held: Privilege, needed: Privilege): boolean =>
  held.has('admin') || [...needed].every((s) => held.has(s));

export const describe = (p: Privilege): string => (p.size === 0 ? 'no privileges' : [...p].sort().join(', '));

/** The privilege of a stored user: Admin, and the scopes of its API keys. */
export async function userPrivilege(
  ctx: Pick<ServiceContext, 'store'>,
  user: Doc | string,
): Promise<Privilege> {
  const doc = typeof user === 'string' ? (await ctx.store.get(User, user))?.doc : user;
  if (!doc) return new Set();
  const held = new Set<Scope>(doc.Admin === true ? ['admin'] : []);
  for (const key of await findWhere(ctx.store, APIKey, { UserID: String(doc.ID) }))
    for (const s of scopesOf(key)) held.add(s);
  held.delete('user');
  return held;
}

/** What a caller holds: its credential's scopes (a session of an administrator at the admin level holds admin). */
export function actorPrivilege(p: Principal): Privilege {
  const held = new Set(p.scopes);
  held.delete('user');
  return held;
}

/** Membership states that make a user part of a group (a request or a rejection does not). */
const IN_GROUP = ['approved', 'active'] as const;

/** Bounds the walk through approver groups (a group whose members approve another's requests). */
const MAX_DEPTH = 4;

/**
 * The privilege of a group: of every user in it, and of every group it approves for (its members
 * decide who joins those, so they hold power over their members too). Changing who approves a
 * group, or who is in a group that confers power (approval, colleague vouching), is power over
 * all of them.
 */
export async function groupPrivilege(
  ctx: Pick<ServiceContext, 'store'>,
  groupId: string,
  depth = 0,
  seen = new Set<string>(),
): Promise<Privilege> {
  const held = new Set<Scope>();
  if (seen.has(groupId) || depth > MAX_DEPTH) return held;
  seen.add(groupId);
  for (const state of IN_GROUP)
    for (const m of await findWhere(ctx.store, Membership, { GroupID: groupId, State: state }))
      for (const s of await userPrivilege(ctx, String(m.UserID))) held.add(s);
  for (const g of await findWhere(ctx.store, Group, { ApproverGroup: groupId }))
    for (const s of await groupPrivilege(ctx, String(g.ID), depth + 1, seen)) held.add(s);
  return held;
}

/**
 * Does being in this group give power over its other members? Colleagues in a group that needs
 * approval may vouch for each other, and members of an approver group decide memberships.
 */
export async function groupConfersPower(ctx: Pick<ServiceContext, 'store'>, group: Doc): Promise<boolean> {
  if (group.RequiresApproval === true) return true;
  return (await findWhere(ctx.store, Group, { ApproverGroup: String(group.ID) })).length > 0;
}

/**
 * The privilege an object stands for, type by type: to change or delete it (and, for the types
 * that act on a user's accounts, to create it) a caller's privilege must cover it.
 * docs/api.md carries this as the privileged-objects table.
 */
export const PRIVILEGE_OF: Record<
  string,
  (ctx: Pick<ServiceContext, 'store'>, doc: Doc) => Promise<Privilege>
> = {
  User: (ctx, doc) => userPrivilege(ctx, doc),
  APIKey: async (_ctx, doc) => new Set(scopesOf(doc).filter((s) => s !== 'user')),
  Group: (ctx, doc) => groupPrivilege(ctx, String(doc.ID)),
  AccountChange: (ctx, doc) => userPrivilege(ctx, String(doc.UserID ?? '')),
};

/** Types whose creation acts on a principal named in the body (a change to a user's accounts). */
export const PRIVILEGED_ON_CREATE: ReadonlySet<string> = new Set([AccountChange.kind]);

/** The privilege ceiling as a decision: `held` must cover `needed`. */
export function ceiling(held: Privilege, needed: Privilege, what: string): Decision {
  if (covers(held, needed))
    return allow(
      'privilege.ceiling',
      `the caller's privilege (${describe(held)}) covers ${what} (${describe(needed)})`,
    );
  return deny(
    'privilege.ceiling',
    `${what} holds privileges the caller lacks (${[...needed].filter((s) => !held.has(s)).join(', ')}); only a caller holding them may act on it`,
  );
}
