import { f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType, READ } from '../schema/type.js';

/** A user's request that another user vouch for them. */
export const VouchRequest: ObjectType = {
  kind: 'VouchRequest',
  path: 'vouchrequests',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { user: { list: 'own', get: 'own' }, audit: READ },
  ownerField: 'UserID',
  fields: {
    UserID: f.string({ maxLength: 64, ref: 'User', doc: 'Who asks to be vouched for' }),
    VoucherID: f.string({ maxLength: 64, ref: 'User', doc: 'Who is asked to vouch' }),
    State: f.enum(['pending', 'approved', 'rejected', 'cancelled', 'expired']),
    Reason: f.string({ maxLength: 1024 }),
    ExpireTime: f.timestamp(),
    HaveVideo: f.boolean({ readOnly: true }),
  },
};
