import { f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType, READ } from '../schema/type.js';

const ACCOUNT_ACTIONS = ['create', 'update', 'disable', 'delete'] as const;

/** One pending or applied change to an account. */
export const AccountChange: ObjectType = {
  kind: 'AccountChange',
  path: 'accountchanges',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { audit: READ },
  fields: {
    PlanID: f.string({ maxLength: 64 }),
    UserID: f.string({ maxLength: 64 }),
    AppID: f.string({ maxLength: 64 }),
    AccountID: f.string({ maxLength: 64 }),
    Action: f.enum(ACCOUNT_ACTIONS),
    Login: f.string({ maxLength: 256 }),
    State: f.enum(['pending', 'approved', 'applied', 'failed', 'cancelled']),
    Reason: f.string({ maxLength: 1024 }),
  },
};
