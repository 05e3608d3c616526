import { deleteUserSessions, listSessions } from '../auth/session/sessions.js';
import { ApiError } from '../core/errors.js';
import { Account } from '../objects/account.js';
import { AccountChange } from '../objects/accountchange.js';
import { APIKey } from '../objects/apikey.js';
import { App } from '../objects/app.js';
import { User } from '../objects/user.js';
import { enforce } from '../policy/decide.js';
import { whileAdministratorsHeld } from '../policy/rules.js';
import type { Doc } from '../schema/fields.js';
import type { Principal } from '../schema/principal.js';
import type { ServiceContext } from '../store/service.js';
import { createChanges, transitionChange } from './changes.js';
import { allOf } from './queries.js';

/** The body of POST /users/:id/disable (docs/directory.md). */
export interface DisableUserResult {
  UserID: string;
  Disabled: true;
  /** Every account of the user and what happens to it (a change approved at once). */
  Accounts: {
    AccountID: string;
    AppID: string;
    Name: string;
    Action: 'disable' | 'delete';
    ChangeID: string;
  }[];
  /** Open changes that would have created or re-enabled an account, cancelled. */
  CancelledChanges: string[];
  SessionsRevoked: number;
  /** IDs of the user's API keys, deleted. */
  APIKeysRevoked: string[];
}

/**
 * Disables a user: the user first (every instance refuses its sessions and keys from the next
 * request: both are checked against the stored user), then the sessions and API keys are deleted,
 * and each account gets a disable or delete change (as its App's Accounts.OnRemove says),
 * approved by the service at once: taking access away never waits for an approval.
 */
export async function disableUser(
  ctx: ServiceContext,
  actor: Principal,
  userId: string,
  reason = '',
): Promise<DisableUserResult> {
  const by = actor.userId;
  const stored = await ctx.store.get(User, userId);
  if (!stored) {
    await enforce(ctx, actor, 'User.disable', { kind: User.kind, id: userId });
    throw new ApiError('NotFound', `User ${userId} does not exist`);
  }
  // The same rules as a PUT of Disabled, and more: the privilege ceiling covers the keys the user
  // owns (disabling revokes them), and the last active administrator stays.
  // Ending an administrator is decided and written under the administrators lock (src/policy).
  const user = await whileAdministratorsHeld(ctx, User.kind, stored.doc, async (held) => {
    const current = held ? (await ctx.store.get(User, userId))?.doc : stored.doc;
    if (!current) throw new ApiError('NotFound', `User ${userId} does not exist`);
    await enforce(ctx, actor, 'User.disable', { kind: User.kind, id: userId, doc: current });
    return ctx.store.systemPut(User, userId, (doc) => {
      if (!doc) throw new ApiError('NotFound', `User ${userId} does not exist`);
      return { doc: { ...doc, Disabled: true } };
    });
  });
  if (!user) throw new ApiError('NotFound', `User ${userId} does not exist`);
  const sessions = (await listSessions(ctx, userId)).length;
  await deleteUserSessions(ctx, userId);
  const keys: string[] = [];
  for (const k of await allOf(ctx.store, APIKey, { UserID: userId })) {
    await ctx.store.systemPut(APIKey, String(k.ID), () => null);
    keys.push(String(k.ID));
  }
  const cancelled: string[] = [];
  for (const c of await allOf(ctx.store, AccountChange, { UserID: userId })) {
    if (
      (c.Action !== 'create' && c.Action !== 'modify') ||
      !['planned', 'approved', 'failed'].includes(String(c.State))
    )
      continue;
    await transitionChange(ctx, String(c.ID), 'cancel', 'system', by)
      .then(() => cancelled.push(String(c.ID)))
      .catch(() => undefined); // claimed meanwhile: it finishes, and the change below follows it
  }
  const accounts: DisableUserResult['Accounts'] = [];
  for (const a of await allOf(ctx.store, Account, { UserID: userId })) {
    const app = (await ctx.store.get(App, String(a.AppID)))?.doc ?? {};
    const action = (app.Accounts as Doc | undefined)?.OnRemove === 'delete' ? 'delete' : 'disable';
    if (action === 'disable' && a.State === 'disabled') continue;
    const [change] = await createChanges(
      ctx,
      [
        {
          UserID: userId,
          AppID: String(a.AppID),
          Action: action,
          AccountName: String(a.Name),
          Reason: reason ? `the user was disabled: ${reason}`.slice(0, 1024) : 'the user was disabled',
        },
      ],
      { by, approved: true },
    );
    accounts.push({
      AccountID: String(a.ID),
      AppID: String(a.AppID),
      Name: String(a.Name),
      Action: action,
      ChangeID: String(change?.ID),
    });
  }
  return {
    UserID: userId,
    Disabled: true,
    Accounts: accounts,
    CancelledChanges: cancelled,
    SessionsRevoked: sessions,
    APIKeysRevoked: keys,
  };
}
