import { Account } from '../objects/account.js';
import { AccountChange } from '../objects/accountchange.js';
import { App } from '../objects/app.js';
import { Membership } from '../objects/membership.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { accountIdOf, deriveAccountName } from './changes.js';
import { allOf } from './queries.js';

/** One suggested change: the body of an AccountChange, with why. */
export interface AccountSuggestion {
  Action: 'create' | 'modify' | 'disable' | 'delete';
  UserID: string;
  AppID: string;
  AccountID: string;
  AccountName: string;
  Reason: string;
}

/** Changes not yet done or dropped: a suggestion is not repeated while one of these is open. */
const OPEN = new Set(['planned', 'approved', 'in_progress', 'failed']);

/**
 * THE account suggestions for one user (the only place they are computed; scripts may refine the
 * list here later): for every App whose Accounts.Groups is set, the user should have an active
 * account there while an active member of one of those groups and not disabled, and not
 * otherwise. Targets with an open change for the user are left out (it is already planned).
 */
export async function suggestAccountChanges(ctx: ServiceContext, user: Doc): Promise<AccountSuggestion[]> {
  const userId = String(user.ID);
  const active = new Set(
    (await allOf(ctx.store, Membership, { UserID: userId, State: 'active' })).map((m) => String(m.GroupID)),
  );
  const open = new Set(
    (await allOf(ctx.store, AccountChange, { UserID: userId }))
      .filter((c) => OPEN.has(String(c.State)))
      .map((c) => String(c.AppID)),
  );
  const accounts = new Map(
    (await allOf(ctx.store, Account, { UserID: userId })).map((a) => [String(a.AppID), a]),
  );
  const out: AccountSuggestion[] = [];
  for (const app of await allOf(ctx.store, App)) {
    const appId = String(app.ID);
    const settings = (app.Accounts ?? {}) as Doc;
    const groups = (settings.Groups ?? []) as string[];
    const account = accounts.get(appId);
    if ((groups.length === 0 && !account) || open.has(appId)) continue;
    const via = groups.find((g) => active.has(g));
    const entitled = via !== undefined && user.Disabled !== true;
    const base = { UserID: userId, AppID: appId, AccountID: accountIdOf(appId, userId) };
    if (entitled && !account)
      out.push({
        ...base,
        Action: 'create',
        AccountName: deriveAccountName(user, app),
        Reason: `active member of group ${via}`,
      });
    else if (entitled && account?.State === 'disabled')
      out.push({
        ...base,
        Action: 'modify',
        AccountName: String(account.Name),
        Reason: `active member of group ${via} again`,
      });
    else if (!entitled && account) {
      const why =
        user.Disabled === true ? 'the user is disabled' : 'no longer an active member of the account groups';
      const onRemove = settings.OnRemove === 'delete' ? 'delete' : 'disable';
      if (account.State === 'active' || onRemove === 'delete')
        out.push({ ...base, Action: onRemove, AccountName: String(account.Name), Reason: why });
    }
  }
  return out;
}
