import { type Doc, f } from '../schema/fields.js';
import { type ObjectType, READ, READ_OPS } from '../schema/type.js';

/**
 * A user's account on a target system (an App, whose provisioning agents apply the changes).
 * Read-only through the API: accounts change only when an agent reports an AccountChange applied
 * (src/directory/, docs/directory.md). The ID is `<AppID>.<UserID>`: one account per user and
 * target, so applying the same change twice cannot make two.
 */
/** The account a change is about: one per (target, user). */
export const accountIdOf = (appId: string, userId: string) => `${appId}.${userId}`;

/** The name an account gets when its change names none: as the App's Accounts.NameFrom says. */
export function deriveAccountName(user: Doc, app: Doc): string {
  const from = String((app.Accounts as Doc | undefined)?.NameFrom ?? 'UserName');
  const local = String(user.Email ?? '').split('@')[0] ?? '';
  const name = from === 'UserName' && user.UserName ? String(user.UserName) : local;
  return name.toLowerCase();
}

export const Account: ObjectType = {
  kind: 'Account',
  path: 'accounts',
  identity: 'generated',
  ops: READ_OPS,
  grants: { user: { list: 'own', get: 'own' }, audit: READ, sync: READ },
  ownerField: 'UserID',
  fields: {
    UserID: f.string({ maxLength: 64, doc: 'The user the account belongs to' }),
    AppID: f.string({ maxLength: 64, doc: 'The target system (an App)' }),
    Name: f.string({ maxLength: 256, doc: 'Account name on the target (a Unix user name where it applies)' }),
    State: f.enum(['active', 'disabled'], { doc: 'See docs/directory.md' }),
    HaveInitialPassword: f.boolean({ doc: 'An initial password is waiting to be fetched' }),
    PasswordFetchTime: f.timestamp({ doc: 'When the initial password was fetched (zero: not yet)' }),
    PasswordFetchedBy: f.string({ maxLength: 64, doc: 'User who fetched the initial password' }),
    LastChangeID: f.string({ maxLength: 64, doc: 'The AccountChange applied last' }),
    UpdateTime: f.timestamp({ doc: 'When a change was last applied' }),
  },
};
