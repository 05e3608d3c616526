import { requirePlannableName } from '../directory/changes.js';
import { applyOp, loadGroup } from '../groups/lifecycle.js';
import { AccountChange } from '../objects/accountchange.js';
import { Membership } from '../objects/membership.js';
import { User } from '../objects/user.js';
import { type Doc, normalize } from '../schema/fields.js';
import type { Principal } from '../schema/principal.js';
import type { ObjectType } from '../schema/type.js';
import { groupMembershipHook, userWriteHook } from '../scripts/hooks.js';
import { groupsOf, hasScripts } from '../scripts/runner.js';
import { iterateWhere } from '../store/find.js';
import type { StoredObject } from '../store/objects.js';
import type { ServiceContext } from '../store/service.js';

/**
 * Before a User is created or updated through the API: the user-write scripts may set fields (the
 * body is returned with them) or reject the write (422). Runs after the caller was authorized for
 * the operation. Returns the body with the script's fields when it set any (the write path then
 * decides again on it: the fields a script sets pass the same rules as the caller's own).
 */
export async function beforeObjectWrite(
  ctx: ServiceContext,
  actor: Principal,
  type: ObjectType,
  id: string | undefined,
  body: unknown,
  previous: Doc | undefined,
): Promise<Doc | undefined> {
  if (type === AccountChange) {
    await accountChangeRules(ctx, id, body, previous);
    return undefined;
  }
  if (type !== User || !(await hasScripts(ctx, 'user-write'))) return undefined;
  if (id !== undefined && !previous) return undefined; // the store answers 404
  let proposed: Doc;
  try {
    proposed = normalize(User.fields, body, previous);
  } catch {
    return undefined; // the store refuses the body with the same error
  }
  const set = await userWriteHook(ctx, {
    Operation: previous ? 'update' : 'create',
    User: { ...proposed, ID: id ?? '' },
    Previous: previous ?? null,
    ActorUserID: actor.userId,
  });
  if (Object.keys(set).length === 0) return undefined;
  return { ...(body as Doc), ...set };
}

/**
 * The account rules for a change planned through the generic API (POST/PUT/PATCH /accountchanges):
 * an account name is unique per App, so a change may not name one another user's account has, or
 * another user's pending change reserves (docs/directory.md, "Account rules").
 */
async function accountChangeRules(
  ctx: ServiceContext,
  id: string | undefined,
  body: unknown,
  previous: Doc | undefined,
) {
  if (id !== undefined && !previous) return; // the store answers 404
  let proposed: Doc;
  try {
    proposed = normalize(AccountChange.fields, body ?? {}, previous);
  } catch {
    return; // the store refuses the body with the same error
  }
  await requirePlannableName(ctx, proposed, id ?? '');
}

/** A membership a group-membership script made says so in its reason. */
export const SCRIPT_MEMBERSHIP_REASON = 'granted by a group-membership script';

/**
 * After a User was created or updated through the API: the group-membership scripts name the
 * groups the user should be in; missing memberships are added (as the service, through the
 * membership lifecycle, so a standing rejection is respected), and memberships a script added
 * before that no script names any more are removed. Memberships people made are never removed.
 */
export async function afterObjectWrite(
  ctx: ServiceContext,
  type: ObjectType,
  obj: StoredObject,
  isCreate: boolean,
) {
  if (type !== User || !(await hasScripts(ctx, 'group-membership'))) return;
  const current = await groupsOf(ctx, obj.id);
  const wanted = await groupMembershipHook(ctx, {
    Operation: isCreate ? 'create' : 'update',
    User: obj.doc,
    Groups: current,
  });
  if (!wanted) return;
  const want = new Set(wanted);
  const byGroup = new Map<string, Doc>();
  for await (const m of iterateWhere(ctx.store, Membership, { UserID: obj.id }))
    byGroup.set(String(m.GroupID), m);
  const apply = async (groupId: string, op: 'add' | 'remove') => {
    try {
      const group = await loadGroup(ctx, groupId);
      await applyOp(ctx, {
        op,
        group,
        userId: obj.id,
        actor: 'system',
        roles: new Set(['admin']),
        reason: SCRIPT_MEMBERSHIP_REASON,
      });
    } catch (err) {
      // An unknown group or a transition the lifecycle refuses (a rejection stands): skipped.
      ctx.logger.info({ err, group: groupId, user: obj.id, op }, 'group-membership script change skipped');
    }
  };
  for (const g of want) {
    const state = String(byGroup.get(g)?.State ?? 'none');
    if (state === 'none' || state === 'requested' || state === 'expired') await apply(g, 'add');
  }
  for (const [g, m] of byGroup) {
    const byScript = (m.Approval as Doc | undefined)?.Reason === SCRIPT_MEMBERSHIP_REASON;
    if (byScript && !want.has(g) && (m.State === 'approved' || m.State === 'active'))
      await apply(g, 'remove');
  }
}
