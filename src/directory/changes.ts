import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { tenantDoc } from '../auth/integrity.js';
import { ApiError } from '../core/errors.js';
import { nowStamp } from '../groups/lifecycle.js';
import { Account, accountIdOf, deriveAccountName } from '../objects/account.js';
import { AccountChange } from '../objects/accountchange.js';
import { AccountChangePlan } from '../objects/accountchangeplan.js';
import { App } from '../objects/app.js';
import { User } from '../objects/user.js';
import { accountNameFree, RESERVING_WHEN_CLAIMING } from '../policy/accounts.js';
import { appMayConcern } from '../policy/apps.js';
import type { Decision } from '../policy/decision.js';
import { type Doc, timestampMs } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { generatePassword, openPassword, readyPasswordKey, sealPassword } from './passwords.js';
import { allOf } from './queries.js';
import { type ChangeOp, type ChangeRole, changeTarget, planTarget } from './states.js';

export { accountIdOf, deriveAccountName };

/** Lease bounds (seconds): a claim asks for one in this range; 300 when it does not say. */
export const LEASE_DEFAULT_S = 300;
export const LEASE_MIN_S = 10;
export const LEASE_MAX_S = 3600;
/** At most this many changes per claim. */
export const CLAIM_MAX = 100;

const sha256 = (s: string) => createHash('sha256').update(s).digest('base64url');

export async function needsApproval(ctx: Pick<ServiceContext, 'store'>): Promise<boolean> {
  return (await tenantDoc(ctx)).AccountChangesNeedApproval === true;
}

/** Who did it, for ApprovedBy and the like: a user ID, or "system". */
export type By = string;

/** Moves one change by the table; throws 404, 403 or 409 (naming the state). Returns the new doc. */
export async function transitionChange(
  ctx: ServiceContext,
  id: string,
  op: ChangeOp,
  role: ChangeRole,
  by: By,
  extra: (doc: Doc) => Doc = (d) => d,
): Promise<Doc> {
  const stored = await ctx.store.systemPut(AccountChange, id, (doc) => {
    if (!doc) throw new ApiError('NotFound', `AccountChange ${id} does not exist`);
    const to = changeTarget(op, String(doc.State), role);
    const next: Doc = { ...doc, State: to };
    if (op === 'approve') Object.assign(next, { ApprovedBy: by, ApprovedTime: nowStamp() });
    if (to === 'cancelled') next.DoneTime = nowStamp();
    if (op === 'retry') Object.assign(next, { Error: '', AgentID: '', LeaseUntil: '0001-01-01T00:00:00Z' });
    return { doc: extra(next) };
  });
  return (stored as { doc: Doc }).doc;
}

/** Actions that give an account a name (and need the App to serve its user). */
const NAMING = new Set(['create', 'modify']);

/**
 * The account rules for a change being planned, by any caller (docs/directory.md, "Account
 * rules"): a create or modify may not plan a name another user's account on the App has, or
 * another user's pending change plans (the name derived as the App says when none is given).
 * 409 naming the rule. `changeId`: the change itself, when it is being edited.
 */
export async function requirePlannableName(ctx: ServiceContext, change: Doc, changeId = ''): Promise<void> {
  if (!NAMING.has(String(change.Action ?? ''))) return;
  const appId = String(change.AppID ?? '');
  const userId = String(change.UserID ?? '');
  const app = (await ctx.store.get(App, appId))?.doc;
  if (!app || userId === '') return; // the store refuses the reference
  const name = await accountNameFor(ctx, change, app);
  const d = await accountNameFree(ctx, appId, userId, name, changeId);
  if (!d.Allowed) throw new ApiError('Conflict', `${d.Reason} (${d.Rule})`, { field: 'AccountName' });
}

/**
 * Creates changes as the service (suggest → plan, disable), approved at once when `approved` or
 * when the tenant does not require approval. Returns the created docs.
 */
export async function createChanges(
  ctx: ServiceContext,
  changes: { UserID: string; AppID: string; Action: string; AccountName?: string; Reason?: string }[],
  opts: { planId?: string; by: By; approved?: boolean },
): Promise<Doc[]> {
  const autoApprove = opts.approved === true || !(await needsApproval(ctx));
  const out: Doc[] = [];
  for (const c of changes) await requirePlannableName(ctx, c);
  for (const c of changes) {
    const { obj } = await ctx.store.create(AccountChange, { ...c, PlanID: opts.planId ?? '' }, undefined, {
      userId: opts.by === 'system' ? '' : opts.by,
    });
    await ctx.store.systemPut(AccountChange, obj.id, (doc) =>
      doc ? { doc: { ...doc, State: 'planned', AccountID: accountIdOf(c.AppID, c.UserID) } } : null,
    );
    out.push(
      autoApprove
        ? await transitionChange(ctx, obj.id, 'approve', 'system', opts.approved ? opts.by : 'system')
        : ((await ctx.store.get(AccountChange, obj.id))?.doc as Doc),
    );
  }
  return out;
}

/** Approves or cancels a plan and, with it, its changes (those the table allows). */
export async function transitionPlan(
  ctx: ServiceContext,
  planId: string,
  op: 'approve' | 'cancel',
  role: ChangeRole,
  by: By,
): Promise<Doc> {
  const stored = await ctx.store.systemPut(AccountChangePlan, planId, (doc) => {
    if (!doc) throw new ApiError('NotFound', `AccountChangePlan ${planId} does not exist`);
    const to = planTarget(op, String(doc.State), role);
    const next: Doc = { ...doc, State: to };
    if (op === 'approve') Object.assign(next, { ApprovedBy: by, ApprovedTime: nowStamp() });
    return { doc: next };
  });
  const from = op === 'approve' ? ['planned'] : ['planned', 'approved', 'failed'];
  for (const c of await allOf(ctx.store, AccountChange, { PlanID: planId })) {
    if (!from.includes(String(c.State))) continue;
    await transitionChange(ctx, String(c.ID), op, role, by).catch((e: unknown) => {
      // Moved on meanwhile (claimed, cancelled): the table refused it, which is the answer.
      if (!(e instanceof ApiError && e.status === 409)) throw e;
    });
  }
  return (stored as { doc: Doc }).doc;
}

// ---- agents ---------------------------------------------------------------------------------

export interface ClaimedChange {
  Change: Doc;
  /** Present this to report the result; valid until LeaseUntil and until someone reclaims. */
  Lease: string;
  /** For a create on a target with Accounts.InitialPassword: the password to set. */
  InitialPassword?: string;
}

/** The account name for a change: given, the account's, or derived as the App says. */
async function accountNameFor(ctx: ServiceContext, change: Doc, app: Doc): Promise<string> {
  if (change.AccountName) return String(change.AccountName);
  const account = await ctx.store.get(Account, accountIdOf(String(change.AppID), String(change.UserID)));
  if (account?.doc.Name) return String(account.doc.Name);
  const user = (await ctx.store.get(User, String(change.UserID)))?.doc ?? {};
  return deriveAccountName(user, app);
}

/**
 * Claims up to `max` changes of the agent's App for `leaseS` seconds. Each claim is one
 * transaction that re-reads the change: only an approved change, or one in progress whose lease
 * has ended, is taken, so two agents never hold the same change; a crashed agent's change goes to
 * the next claim after its lease. Planned changes are approved first when the tenant needs no
 * approval (ApprovedBy "system").
 */
export async function claimChanges(
  ctx: ServiceContext,
  appId: string,
  agentId: string,
  max: number,
  leaseS: number,
): Promise<ClaimedChange[]> {
  const app = (await ctx.store.get(App, appId))?.doc ?? {};
  if (!(await needsApproval(ctx))) {
    for (const c of await allOf(ctx.store, AccountChange, { AppID: appId, State: 'planned' }))
      await transitionChange(ctx, String(c.ID), 'approve', 'system', 'system').catch(() => undefined);
  }
  // Oldest approval first; a change whose account has another change in progress is skipped (the
  // Applying key of AccountChange makes that check part of the claim's transaction).
  const candidates = [
    ...(await allOf(ctx.store, AccountChange, { AppID: appId, State: 'in_progress' })),
    ...(await allOf(ctx.store, AccountChange, { AppID: appId, State: 'approved' })).sort((x, y) =>
      String(x.ApprovedTime).localeCompare(String(y.ApprovedTime)),
    ),
  ];
  const claimed: ClaimedChange[] = [];
  if (candidates.length > 0) await readyPasswordKey(ctx);
  for (const c of candidates) {
    if (claimed.length >= max) break;
    const id = String(c.ID);
    const name = await accountNameFor(ctx, c, app);
    if (c.State === 'approved') {
      const refused = await claimRefusal(ctx, { ...app, ID: appId }, c, name);
      if (refused) {
        await refuseChange(ctx, id, refused);
        continue;
      }
    }
    const lease = randomBytes(32).toString('base64url');
    let password: string | undefined;
    const stored = await ctx.store
      .systemPut(AccountChange, id, async (doc, secret) => {
        if (!doc) return null;
        const now = Date.now();
        let op: ChangeOp;
        if (doc.State === 'approved') op = 'claim';
        else if (doc.State === 'in_progress' && timestampMs(String(doc.LeaseUntil)) <= now) op = 'reclaim';
        else return { doc }; // someone else's now: left alone
        changeTarget(op, String(doc.State), 'agent');
        const next: Doc = {
          ...doc,
          State: 'in_progress',
          // Changes stored before every change named its account get it here, so the Applying
          // key holds for them too: one change per account in progress, whoever made it.
          AccountID: accountIdOf(String(doc.AppID), String(doc.UserID)),
          AccountName: doc.AccountName || name,
          AgentID: agentId,
          LeaseUntil: nowStamp(now + leaseS * 1000),
          Attempts: Number(doc.Attempts ?? 0) + 1,
          Error: '',
        };
        const nextSecret: Doc = { ...secret, LeaseHash: sha256(lease) };
        const wantsPassword = (app.Accounts as Doc | undefined)?.InitialPassword === true;
        if (doc.Action === 'create' && wantsPassword) {
          // The same password on every attempt: an agent that crashed may have set it already.
          if (typeof secret.InitialPassword === 'string')
            password = await openPassword(ctx, secret.InitialPassword, id);
          else {
            password = generatePassword();
            nextSecret.InitialPassword = await sealPassword(ctx, password, id);
          }
        }
        return { doc: next, secret: nextSecret };
      })
      .catch((e: unknown) => {
        // Another change of the same account is in progress: this one waits for a later claim.
        if (e instanceof ApiError && e.status === 409) return undefined;
        throw e;
      });
    const doc = stored?.doc;
    if (!doc || doc.AgentID !== agentId || (await leaseHash(ctx, id)) !== sha256(lease)) continue;
    claimed.push({
      Change: doc,
      Lease: lease,
      ...(password !== undefined ? { InitialPassword: password } : {}),
    });
  }
  return claimed;
}

/**
 * Why an agent of the App may not be handed this change, if it may not: a create or modify for a
 * user the App does not serve (App isolation: a user removed from its AccessGroups, disabled or
 * merged keeps only disables and deletes flowing), or under a name another user's account on the
 * App has, or another user's change being applied holds (account rules).
 */
async function claimRefusal(
  ctx: ServiceContext,
  app: Doc,
  change: Doc,
  name: string,
): Promise<Decision | undefined> {
  if (!NAMING.has(String(change.Action))) return undefined;
  const userId = String(change.UserID ?? '');
  const served = await appMayConcern(ctx, app, userId);
  if (!served.Allowed) return served;
  const free = await accountNameFree(
    ctx,
    String(change.AppID),
    userId,
    name,
    String(change.ID),
    RESERVING_WHEN_CLAIMING,
  );
  return free.Allowed ? undefined : free;
}

/** Cancels a change the policy refused (as the service), saying why in Error; left alone if it moved on. */
async function refuseChange(ctx: ServiceContext, id: string, d: Decision) {
  ctx.logger.warn({ change: id, rule: d.Rule }, `account change refused: ${d.Reason}`);
  await transitionChange(ctx, id, 'cancel', 'system', 'system', (doc) => ({
    ...doc,
    Error: `refused (${d.Rule}): ${d.Reason}`.slice(0, 2048),
  })).catch((e: unknown) => {
    if (!(e instanceof ApiError && e.status === 409)) throw e;
  });
}

const leaseHash = async (ctx: ServiceContext, id: string) =>
  (await ctx.store.getSecret(AccountChange, id)).LeaseHash;

/**
 * An agent's report on a change it holds. The lease must be the current one (a reclaimed change
 * refuses the old holder: 409), so at most one report is ever accepted per claim and a change is
 * applied once. The account is written first and the change second; both writes are idempotent,
 * so an agent that lost the answer simply reports again with the same lease.
 */
export async function reportChange(
  ctx: ServiceContext,
  appId: string,
  id: string,
  lease: string,
  result: 'applied' | 'failed',
  error: string,
): Promise<Doc> {
  const current = await ctx.store.get(AccountChange, id);
  if (!current || current.doc.AppID !== appId)
    throw new ApiError('NotFound', `AccountChange ${id} does not exist`);
  const holds = async () => {
    const stored = Buffer.from(String((await leaseHash(ctx, id)) ?? ''));
    const given = Buffer.from(sha256(lease));
    return stored.length === given.length && timingSafeEqual(stored, given);
  };
  if (current.doc.State === result && current.doc.AgentID !== '' && (await holds())) return current.doc;
  if (!(await holds()))
    throw new ApiError(
      'Conflict',
      'this lease is not the current one: the change was reclaimed after it ended',
    );
  const change = current.doc;
  if (result === 'applied') await applyToAccount(ctx, change, current.id);
  const stored = await ctx.store.systemPut(AccountChange, id, (doc, secret) => {
    if (!doc) throw new ApiError('NotFound', `AccountChange ${id} does not exist`);
    if (secret.LeaseHash !== sha256(lease))
      throw new ApiError(
        'Conflict',
        'this lease is not the current one: the change was reclaimed after it ended',
      );
    const to = changeTarget(result === 'applied' ? 'apply' : 'fail', String(doc.State), 'agent');
    const { InitialPassword: _p, ...rest } = secret;
    return {
      doc: {
        ...doc,
        State: to,
        Error: result === 'failed' ? error.slice(0, 2048) : '',
        DoneTime: nowStamp(),
      },
      // The lease stays recorded so a repeated report is recognised; the password moved to the account.
      secret: result === 'applied' ? rest : secret,
    };
  });
  return (stored as { doc: Doc }).doc;
}

async function applyToAccount(ctx: ServiceContext, change: Doc, changeId: string) {
  const accountId = accountIdOf(String(change.AppID), String(change.UserID));
  const changeSecret = await ctx.store.getSecret(AccountChange, changeId);
  const box = typeof changeSecret.InitialPassword === 'string' ? changeSecret.InitialPassword : undefined;
  const plain = box ? await openPassword(ctx, box, changeId) : undefined;
  const sealed = plain ? await sealPassword(ctx, plain, accountId) : undefined;
  await ctx.store.systemPut(Account, accountId, (doc, secret) => {
    if (doc?.LastChangeID === changeId) return { doc }; // applied already: a repeated report
    const base: Doc = doc ?? { UserID: change.UserID, AppID: change.AppID, State: 'active' };
    const stamp = { LastChangeID: changeId, UpdateTime: nowStamp() };
    switch (change.Action) {
      case 'create':
      case 'modify': {
        const next: Doc = { ...base, ...stamp, Name: change.AccountName || base.Name, State: 'active' };
        if (change.Action === 'create' && sealed) {
          Object.assign(next, {
            HaveInitialPassword: true,
            PasswordFetchTime: '0001-01-01T00:00:00Z',
            PasswordFetchedBy: '',
          });
          return { doc: next, secret: { ...secret, InitialPassword: sealed } };
        }
        return { doc: next };
      }
      case 'disable':
        return doc ? { doc: { ...doc, ...stamp, State: 'disabled' } } : null;
      default:
        return null; // delete
    }
  });
}
