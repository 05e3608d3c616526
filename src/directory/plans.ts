import { AccountChangePlan } from '../objects/accountchangeplan.js';
import type { Actor } from '../policy/actor.js';
import { enforce } from '../policy/decide.js';
import type { Principal } from '../schema/principal.js';
import { type ServiceContext, writerOf } from '../store/service.js';
import { createChanges, needsApproval, transitionPlan } from './changes.js';

/** One suggested change, as POST /users/:id/accounts/suggest lists them. */
export interface SuggestedChange {
  Action: string;
  UserID: string;
  AppID: string;
  AccountName: string;
  Reason: string;
}

/**
 * Makes a plan of a user's suggested account changes: a plan acts on that user's accounts, so the
 * caller's privilege must cover the user's (a sync key plans nothing for an administrator). With
 * no approval required by the tenant, the plan is approved as it is made.
 */
export async function planAccountChanges(
  ctx: ServiceContext,
  actor: Principal,
  userId: string,
  changes: readonly SuggestedChange[],
  plan: { Name?: string | undefined; Reason?: string | undefined },
): Promise<{ PlanID: string; PlanState?: string }> {
  await enforce(ctx, actor as Actor, 'Account.plan', { kind: 'User', id: userId, userId });
  if (changes.length === 0) return { PlanID: '' };
  const { obj } = await writerOf(ctx).write({
    actor,
    type: AccountChangePlan,
    op: 'create',
    body: { Name: plan.Name ?? `Accounts of ${userId}`, Reason: plan.Reason ?? 'suggested' },
  });
  const planId = String(obj?.id);
  await createChanges(
    ctx,
    changes.map(({ Action, UserID, AppID, AccountName, Reason }) => ({
      Action,
      UserID,
      AppID,
      AccountName,
      Reason,
    })),
    { planId, by: actor.userId },
  );
  const approved = (await needsApproval(ctx))
    ? undefined
    : await transitionPlan(ctx, planId, 'approve', 'system', 'system');
  return { PlanID: planId, PlanState: String(approved?.State ?? 'proposed') };
}
