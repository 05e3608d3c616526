import { Account, deriveAccountName } from '../objects/account.js';
import { AccountChange } from '../objects/accountchange.js';
import { App } from '../objects/app.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { parseListQuery } from '../store/listquery.js';
import type { ServiceContext } from '../store/service.js';
import { allow, type Decision, deny } from './decision.js';

/*
 * The account rules (docs/directory.md, "Account rules"): an account name is unique per App, and
 * a name planned for one user's account on an App is not planned for another user's meanwhile.
 * Checked when a change is planned (any caller) and again when an agent claims it, so an agent is
 * never handed a second account of a name; AccountChange's Naming key (src/objects/accountchange.ts)
 * makes two claims of one name at once fail inside the claim's transaction besides.
 */

/** The rule names this file decides with. */
export const ACCOUNT_RULES = ['account.name-unique', 'account.name-reserved', 'account.name-free'] as const;

/**
 * Changes that still decide a name: when planning, every one planned, approved or being applied;
 * when an agent claims, those being applied (a name two approved changes plan goes to the first
 * claimed, and the second is refused then).
 */
export const RESERVING_WHEN_PLANNING = ['planned', 'approved', 'in_progress'] as const;
export const RESERVING_WHEN_CLAIMING = ['in_progress'] as const;

async function* docsOf(ctx: Pick<ServiceContext, 'store'>, type: ObjectType, filter: string[]) {
  const page = await ctx.store.list(type, parseListQuery(type, { filter, order: ['ID'] }));
  for await (const chunk of page.chunks)
    for (const line of chunk.split('\n')) if (line !== '') yield JSON.parse(line).Item as Doc;
}

const eq = (field: string, value: string) => `${field} = ${JSON.stringify(value)}`;

/**
 * May `name` be the name of `userId`'s account on `appId`? Refused when another user's account
 * on the App has it (`account.name-unique`), or another user's pending create or modify change on
 * the App plans it (`account.name-reserved`; `changeId` is the change being checked itself;
 * `reserving` the states of changes that hold a name).
 * Names are compared as given and in lower case (derived names are lower case).
 */
export async function accountNameFree(
  ctx: Pick<ServiceContext, 'store'>,
  appId: string,
  userId: string,
  name: string,
  changeId = '',
  reserving: readonly string[] = RESERVING_WHEN_PLANNING,
): Promise<Decision> {
  if (name === '') return allow('account.name-free', 'no name is planned yet');
  const reserved = deny(
    'account.name-reserved',
    `a pending change plans the name ${name} on App ${appId} for another user`,
  );
  const pending = (c: Doc) =>
    c.ID !== changeId &&
    c.UserID !== userId &&
    reserving.includes(String(c.State)) &&
    (c.Action === 'create' || c.Action === 'modify');
  const spellings = [...new Set([name, name.toLowerCase()])];
  for (const as of spellings)
    for await (const c of docsOf(ctx, AccountChange, [eq('AppID', appId), eq('AccountName', as)]))
      if (pending(c)) return reserved;
  // Creates that name no account plan the name derived from their user, as the App says.
  let app: Doc | undefined;
  for await (const c of docsOf(ctx, AccountChange, [eq('AppID', appId), eq('AccountName', '')])) {
    if (!pending(c) || c.Action !== 'create') continue;
    app ??= (await ctx.store.get(App, appId))?.doc ?? {};
    const user = (await ctx.store.get(User, String(c.UserID)))?.doc;
    if (user && deriveAccountName(user, app).toLowerCase() === name.toLowerCase()) return reserved;
  }
  // Accounts last: a change applied meanwhile has left the changes read above only after its
  // account was written, so one of the two reads sees it.
  const taken = deny('account.name-unique', `App ${appId} already has an account named ${name}`);
  for (const as of spellings)
    for await (const a of docsOf(ctx, Account, [eq('AppID', appId), eq('Name', as)]))
      if (a.UserID !== userId) return taken;
  return allow('account.name-free', `no other account on App ${appId} is named ${name}`);
}
