import { f } from '../schema/fields.js';
import { type ObjectType, READ, READ_OPS } from '../schema/type.js';

/**
 * A user's membership of a group, one object per (group, user). It is an ordinary object type
 * (read-only through the generic API: GET /memberships, GET /memberships/:id), so memberships
 * appear in lists and on the event stream (Kind "Membership") like every other object. All
 * writes go through the lifecycle endpoints under /groups/:id/members/:user (src/api/groups.ts),
 * which apply the transition table in states.ts.
 *
 * Every stored version carries LastChange (who, when, why, which operation, from which state);
 * the change log keeps every version, so the full history of a membership is the sequence of its
 * versions (GET /groups/:id/members/:user/history).
 */

/** Who did something and why. ByUserID is '' for an API key that belongs to no user. */
const decision = (what: string) =>
  f.object(
    {
      ByUserID: f.string({ maxLength: 64, doc: `User who ${what}` }),
      ByKeyID: f.string({ maxLength: 64, doc: 'API key used, when one was' }),
      Time: f.timestamp(),
      Reason: f.string({ maxLength: 1024 }),
    },
    { doc: `Who ${what}, when and why; zero values when not applicable` },
  );

export const STATES = ['requested', 'approved', 'active', 'rejected', 'expired', 'removed'] as const;

export const Membership: ObjectType = {
  kind: 'Membership',
  path: 'memberships',
  identity: 'generated',
  ops: READ_OPS,
  // sync reads memberships: they change only through /groups/:id/members/:user (docs/groups.md).
  grants: { user: { list: 'own', get: 'own' }, audit: READ, sync: READ },
  ownerField: 'UserID',
  fields: {
    GroupID: f.string({ maxLength: 64, ref: 'Group' }),
    UserID: f.string({ maxLength: 64, ref: 'User' }),
    State: f.enum(STATES, { doc: 'See docs/groups.md for the states and transitions' }),
    Reason: f.string({ maxLength: 1024, doc: 'Why the user is (or asked to be) a member' }),
    RequestTime: f.timestamp({ doc: 'When the user asked to join (zero: added by someone else)' }),
    Approval: decision('approved the membership'),
    ActivateTime: f.timestamp({ doc: 'When the membership last became active' }),
    LastUsed: f.timestamp({ doc: 'Last use recorded by POST .../use (zero: never)' }),
    Rejection: decision('rejected the membership'),
    LastChange: f.object(
      {
        Op: f.string({
          maxLength: 32,
          doc: 'add, request, approve, activate, use, reject, unreject, remove, expire',
        }),
        FromState: f.string({ maxLength: 32, doc: 'State before the change ("none" for a new membership)' }),
        ByUserID: f.string({ maxLength: 64 }),
        ByKeyID: f.string({ maxLength: 64 }),
        Via: f.string({ maxLength: 16, doc: 'apikey, session or system' }),
        Time: f.timestamp(),
        Reason: f.string({ maxLength: 1024 }),
      },
      { doc: 'Who made the latest change, when and why' },
    ),
  },
};

/** The ID of the membership of `userId` in `groupId`: one object per pair. */
export const membershipId = (groupId: string, userId: string) => `${groupId}.${userId}`;
