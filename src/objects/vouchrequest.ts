import { f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType, READ } from '../schema/type.js';

/**
 * A user's request that a colleague vouch for them (docs/signin.md, "Vouching"). Created by
 * POST /auth/vouch and moved through its states only by the vouch endpoints, which apply the
 * transition table in src/auth/factors/vouch/lifecycle.ts; the generic API may read it, and an
 * administrator may create, edit Reason of, or delete one, but no generic write changes the
 * read-only lifecycle fields (a request created that way names no session and can never raise
 * one).
 */
export const VouchRequest: ObjectType = {
  kind: 'VouchRequest',
  path: 'vouchrequests',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { user: { list: 'own', get: 'own' }, audit: READ },
  ownerField: 'UserID',
  fields: {
    UserID: f.string({ maxLength: 64, ref: 'User', doc: 'Who asks to be vouched for' }),
    State: f.enum(['pending', 'approved', 'rejected', 'cancelled', 'expired'], {
      readOnly: true,
      doc: 'See docs/signin.md for the states and transitions',
    }),
    Reason: f.string({ maxLength: 1024, doc: "The requester's note to the vouchers" }),
    Vouchers: f.strings({
      maxItems: 64,
      readOnly: true,
      doc: 'User IDs who may vouch: colleagues and approvers, decided when the request is made',
    }),
    GroupID: f.string({
      maxLength: 64,
      readOnly: true,
      doc: 'The group the requester named to choose the vouchers from ("" when none)',
    }),
    Level: f.integer({
      min: 0,
      max: 4,
      readOnly: true,
      doc: 'Integrity level approval raises the session to',
    }),
    MagicWords: f.strings({ maxItems: 12, readOnly: true, doc: 'Words the requester says in the video' }),
    ExpireTime: f.timestamp({ readOnly: true, doc: 'A pending request expires at this time' }),
    HaveVideo: f.boolean({ readOnly: true, doc: 'The requester supplied the video' }),
    VoucherID: f.string({
      maxLength: 64,
      readOnly: true,
      doc: 'Who approved or declined ("" while pending)',
    }),
    DecideTime: f.timestamp({ readOnly: true, doc: 'When it was approved, declined, cancelled or expired' }),
  },
};
