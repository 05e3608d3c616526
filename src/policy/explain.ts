import { ApiError } from '../core/errors.js';
import { APIKey } from '../objects/apikey.js';
import { Group } from '../objects/group.js';
import { Membership } from '../objects/membership.js';
import { objectTypes } from '../objects/registry.js';
import { User } from '../objects/user.js';
import type { Principal } from '../schema/principal.js';
import type { Scope } from '../schema/type.js';
import type { ServiceContext } from '../store/service.js';
import { describeActor, SYSTEM } from './actor.js';
import { ACTIONS, decide } from './decide.js';
import type { Decision } from './decision.js';
import type { Target } from './rules.js';

/**
 * The actor a user ID or an API key ID stands for, as the policy would see it at its strongest:
 * an API key with its scopes; a user as its own session at a level that carries every scope it
 * has (an administrator holds admin).
 */
async function actorOf(ctx: Pick<ServiceContext, 'store'>, id: string): Promise<Principal> {
  const key = await ctx.store.get(APIKey, id);
  if (key) {
    const scopes = new Set((key.doc.Scopes as Scope[] | undefined) ?? []);
    return { via: 'apikey', userId: String(key.doc.UserID ?? ''), scopes, keyId: key.id };
  }
  const user = await ctx.store.get(User, id);
  if (!user) throw new ApiError('NotFound', `no user or API key ${id}`, { field: 'actor' });
  const scopes = new Set<Scope>(user.doc.Admin === true ? ['admin', 'user'] : ['user']);
  return { via: 'session', userId: user.id, scopes, integrityLevel: 4 };
}

/** The target of an action, loaded: memberships are named `<GroupID>.<UserID>` and bring their group. */
async function targetOf(ctx: Pick<ServiceContext, 'store'>, kind: string, id: string): Promise<Target> {
  if (kind === Membership.kind) {
    const [groupId = '', userId = ''] = id.split('.');
    const group = await ctx.store.get(Group, groupId);
    if (!group) throw new ApiError('NotFound', `Group ${groupId} does not exist`, { field: 'id' });
    return { kind, id, userId, group: group.doc, doc: (await ctx.store.get(Membership, id))?.doc };
  }
  const type = objectTypes.find((t) => t.kind === kind);
  if (!type) throw new ApiError('InvalidField', `${kind} is not an object type`, { field: 'kind' });
  const doc = id === '' ? undefined : (await ctx.store.get(type, id))?.doc;
  return { kind, id, doc, userId: kind === User.kind ? id : undefined };
}

/** GET /policy/explain?actor=&action=&kind=&id=: the decision, with the actor's description first. */
export async function explainAction(
  ctx: Pick<ServiceContext, 'store'>,
  q: { actor: string; action: string; kind?: string; id?: string },
): Promise<Decision & { Actor: string; Action: string }> {
  const action = ACTIONS[q.action];
  if (!action)
    throw new ApiError('InvalidField', `${q.action} is not an action; GET /policy/actions lists them`, {
      field: 'action',
    });
  const actor = await actorOf(ctx, q.actor);
  const target = await targetOf(ctx, q.kind ?? action.target, q.id ?? '');
  return { ...(await decide(ctx, actor, q.action, target)), Actor: describeActor(actor), Action: q.action };
}

/** Every action with its description and the names of its rules (GET /policy/actions). */
export const actionList = () =>
  Object.entries(ACTIONS).map(([name, a]) => ({
    Action: name,
    Description: a.description,
    Effect: a.effect,
    Target: a.target,
    Rules: [...new Set(a.rules.map((r) => r.name))],
  }));

/** GET /policy/explain?user=&app=: may this user use this App (at `level`, or by membership state alone)? */
export async function explainAppUse(
  ctx: Pick<ServiceContext, 'store'>,
  q: { user: string; app: string; level?: number },
): Promise<Decision & { Actor: string; Action: string }> {
  if (!(await ctx.store.get(User, q.user)))
    throw new ApiError('NotFound', `User ${q.user} does not exist`, { field: 'user' });
  const d = await decide(ctx, SYSTEM, 'App.use', { kind: 'App', id: q.app, userId: q.user, level: q.level });
  return { ...d, Actor: `user ${q.user}`, Action: 'App.use' };
}
