import { moveLinks } from '../auth/factors/oauth2rp/store.js';
import { decryptSecret, encryptSecret } from '../auth/factors/secrets.js';
import { moveReferenceVideo } from '../auth/factors/vouch/videos.js';
import { deleteUserSessions } from '../auth/session/sessions.js';
import { ApiError } from '../core/errors.js';
import { Account } from '../objects/account.js';
import { AccountChange } from '../objects/accountchange.js';
import { ActivationCode } from '../objects/activationcode.js';
import { APIKey } from '../objects/apikey.js';
import { Group } from '../objects/group.js';
import { Membership, membershipId } from '../objects/membership.js';
import { User } from '../objects/user.js';
import { VouchRequest } from '../objects/vouchrequest.js';
import { enforce } from '../policy/decide.js';
import { whileAdministratorsHeld } from '../policy/rules.js';
import type { Doc } from '../schema/fields.js';
import type { Principal } from '../schema/principal.js';
import type { ObjectType } from '../schema/type.js';
import type { ServiceContext } from '../store/service.js';
import { accountIdOf } from './changes.js';
import { openPassword, sealPassword } from './passwords.js';
import { allOf } from './queries.js';

/**
 * Per-user records that move by rewriting user-ID fields: THE list a new per-user object type
 * joins (`{ type, fields: ['UserID'] }`). Records whose ID is derived from the user (memberships,
 * accounts) and records in tables of their own (reference videos, federated links) have their own
 * step in mergeUsers.
 */
export const PER_USER_RECORDS: readonly { type: ObjectType; fields: readonly string[] }[] = [
  { type: AccountChange, fields: ['UserID'] },
  { type: VouchRequest, fields: ['UserID', 'VoucherID'] },
  { type: ActivationCode, fields: ['UserID'] },
];

/** Hidden factor state encrypted with the user's ID bound in: re-encrypted for the target. */
const BOUND_SECRETS: Record<string, (userId: string) => string> = {
  TOTPSecret: (id) => `totp:${id}`,
  TOTPPending: (id) => `totp:${id}`,
};
/** Hidden state that goes with another key (moved only together). */
const COMPANIONS: Record<string, string> = { TOTPLastStep: 'TOTPSecret' };
/** Flags that say a factor is set up. */
const FLAGS = ['HavePassword', 'HavePIN', 'HaveTOTPSecret'];

const RANK: Record<string, number> = { expired: 1, requested: 2, approved: 3, active: 4 };

/**
 * Merges `fromId` into `toId`: e-mail addresses, user name and names (where the target has
 * none), sign-in factors the target lacks, memberships, accounts and every record of
 * PER_USER_RECORDS move to the target; the from user's API keys and sessions are revoked and it is
 * left disabled with MergedInto pointing at the target. Each step is idempotent, so a merge cut
 * short is finished by sending it again.
 */
export async function mergeUsers(
  ctx: ServiceContext,
  actor: Principal,
  toId: string,
  fromId: string,
): Promise<void> {
  await enforce(ctx, actor, 'User.merge-into', { kind: User.kind, id: toId });
  if (fromId === '' || fromId === toId)
    throw new ApiError('BadRequest', 'give the user to merge from (?from=<id>), other than the target', {
      field: 'from',
    });
  const to = await ctx.store.get(User, toId);
  if (!to) throw new ApiError('NotFound', `User ${toId} does not exist`);
  const from = await ctx.store.get(User, fromId);
  if (!from) throw new ApiError('NotFound', `User ${fromId} does not exist`);
  // Both users: the target gains the other's factors, the merged-away user stops signing in.
  await enforce(ctx, actor, 'User.merge-into', { kind: User.kind, id: toId, doc: to.doc });
  let taken: { doc: Doc; secret: Doc } = { doc: from.doc, secret: {} };
  // Ending an administrator is decided and written under the administrators lock (src/policy).
  await whileAdministratorsHeld(ctx, User.kind, from.doc, async (held) => {
    const current = held ? (await ctx.store.get(User, fromId))?.doc : from.doc;
    if (!current) throw new ApiError('NotFound', `User ${fromId} does not exist`);
    await enforce(ctx, actor, 'User.merge', { kind: User.kind, id: fromId, doc: current });
    if (to.doc.MergedInto)
      throw new ApiError('Conflict', `User ${toId} was merged into ${String(to.doc.MergedInto)}`);
    if (current.MergedInto && current.MergedInto !== toId)
      throw new ApiError('Conflict', `User ${fromId} was merged into ${String(current.MergedInto)} already`);

    // 1. The from user lets go of its unique fields and its credentials, and is disabled.
    await ctx.store.systemPut(User, fromId, (doc, secret) => {
      if (!doc) throw new ApiError('NotFound', `User ${fromId} does not exist`);
      // On a repeated merge the values were moved already: the pending secret stays under MergeSecret.
      const kept = (secret.MergeSecret as Doc | undefined) ?? secret;
      taken = { doc: (secret.MergeDoc as Doc | undefined) ?? doc, secret: kept };
      return {
        doc: {
          ...doc,
          Email: '',
          OtherEmails: [],
          UserName: '',
          Disabled: true,
          MergedInto: toId,
          ...Object.fromEntries(FLAGS.map((f) => [f, false])),
        },
        secret: { MergeSecret: kept, MergeDoc: taken.doc },
      };
    });
  });
  await deleteUserSessions(ctx, fromId);
  for (const k of await allOf(ctx.store, APIKey, { UserID: fromId }))
    await ctx.store.systemPut(APIKey, String(k.ID), () => null);

  // 2. The target takes what it lacks.
  const moved: Doc = {};
  for (const [k, v] of Object.entries(taken.secret)) {
    const bound = BOUND_SECRETS[k];
    moved[k] =
      bound && typeof v === 'string'
        ? await encryptSecret(ctx, await decryptSecret(ctx, v, bound(fromId)), bound(toId))
        : v;
  }
  await ctx.store.systemPut(User, toId, (doc, secret) => {
    if (!doc) throw new ApiError('NotFound', `User ${toId} does not exist`);
    const f = taken.doc;
    const emails = [String(doc.Email), ...(doc.OtherEmails as string[])].map((e) => e.toLowerCase());
    const extra = [String(f.Email ?? ''), ...((f.OtherEmails as string[] | undefined) ?? [])].filter(
      (e) => e !== '' && !emails.includes(e.toLowerCase()),
    );
    const next: Doc = {
      ...doc,
      Email: doc.Email || (extra.shift() ?? ''),
      OtherEmails: [...(doc.OtherEmails as string[]), ...extra].slice(0, 16),
      UserName: doc.UserName || f.UserName || '',
      Name: {
        ...((f.Name as Doc | undefined) ?? {}),
        ...Object.fromEntries(Object.entries(doc.Name as Doc).filter(([, v]) => v !== '')),
      },
    };
    const nextSecret: Doc = { ...secret };
    for (const [k, v] of Object.entries(moved)) {
      const owner = COMPANIONS[k] ?? k;
      if (secret[owner] === undefined) nextSecret[k] = v;
    }
    for (const flag of FLAGS) next[flag] = doc[flag] === true || f[flag] === true;
    return { doc: next, secret: nextSecret };
  });
  await ctx.store.systemPut(User, fromId, (doc) => (doc ? { doc, secret: {} } : null));

  await moveMemberships(ctx, fromId, toId);
  await moveAccounts(ctx, fromId, toId);
  await moveReferenceVideo(ctx, fromId, toId);
  await moveLinks(ctx, fromId, toId);
  for (const { type, fields } of PER_USER_RECORDS) {
    for (const field of fields) {
      for (const r of await allOf(ctx.store, type, { [field]: fromId })) {
        await ctx.store.systemPut(type, String(r.ID), (doc) => {
          if (!doc) return null;
          const next: Doc = { ...doc, [field]: toId };
          if (type === AccountChange && doc.AppID) next.AccountID = accountIdOf(String(doc.AppID), toId);
          return { doc: next };
        });
      }
    }
  }
  for (const g of await allOf(ctx.store, Group)) {
    const approvers = (g.Approvers as string[] | undefined) ?? [];
    if (!approvers.includes(fromId)) continue;
    await ctx.store.systemPut(Group, String(g.ID), (doc) =>
      doc
        ? { doc: { ...doc, Approvers: [...new Set(approvers.map((a) => (a === fromId ? toId : a)))] } }
        : null,
    );
  }
}

async function moveMemberships(ctx: ServiceContext, fromId: string, toId: string) {
  for (const m of await allOf(ctx.store, Membership, { UserID: fromId })) {
    const groupId = String(m.GroupID);
    await ctx.store.systemPut(Membership, membershipId(groupId, toId), (doc) => {
      const mine = doc?.State;
      // The target's own standing wins unless the from user's is stronger; a rejection is kept.
      const takeFrom =
        !doc ||
        (mine !== 'rejected' &&
          m.State !== 'rejected' &&
          (RANK[String(m.State)] ?? 0) > (RANK[String(mine)] ?? 0));
      return takeFrom ? { doc: { ...m, UserID: toId } } : { doc };
    });
    await ctx.store.systemPut(Membership, String(m.ID), () => null);
  }
}

async function moveAccounts(ctx: ServiceContext, fromId: string, toId: string) {
  for (const a of await allOf(ctx.store, Account, { UserID: fromId })) {
    const appId = String(a.AppID);
    const newId = accountIdOf(appId, toId);
    if (await ctx.store.get(Account, newId)) continue; // the target has its own: the from user's stays (disabled user)
    const secret = await ctx.store.getSecret(Account, String(a.ID));
    const box = typeof secret.InitialPassword === 'string' ? secret.InitialPassword : undefined;
    const resealed = box
      ? await sealPassword(ctx, await openPassword(ctx, box, String(a.ID)), newId)
      : undefined;
    await ctx.store.systemPut(Account, newId, () => ({
      doc: { ...a, UserID: toId },
      secret: resealed ? { InitialPassword: resealed } : {},
    }));
    await ctx.store.systemPut(Account, String(a.ID), () => null);
  }
}
