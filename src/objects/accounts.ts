import { f } from './fields.js';
import { ALL_OPS, type ObjectType, READ_OPS } from './type.js';

const ACCOUNT_ACTIONS = ['create', 'update', 'disable', 'delete'] as const;

/** Rules for provisioning accounts of users in an app. */
export const AccountChangePlan: ObjectType = {
  kind: 'AccountChangePlan',
  path: 'accountchangeplans',
  identity: 'generated',
  ops: ALL_OPS,
  fields: {
    Name: f.string({ maxLength: 256 }),
    AppID: f.string({ maxLength: 64 }),
    GroupID: f.string({ maxLength: 64, doc: 'Members of this group get an account' }),
    LoginTemplate: f.string({
      maxLength: 256,
      default: '{{UserName}}',
      doc: 'How the account login is derived from the user',
    }),
    AutoApply: f.boolean({ doc: 'Apply changes without review' }),
  },
};

/** One pending or applied change to an account. */
export const AccountChange: ObjectType = {
  kind: 'AccountChange',
  path: 'accountchanges',
  identity: 'generated',
  ops: ALL_OPS,
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

/** An account of a user in an app; read-only, maintained by the service. */
export const Account: ObjectType = {
  kind: 'Account',
  path: 'accounts',
  identity: 'generated',
  ops: READ_OPS,
  fields: {
    UserID: f.string({ maxLength: 64 }),
    AppID: f.string({ maxLength: 64 }),
    Login: f.string({ maxLength: 256 }),
    State: f.enum(['active', 'disabled']),
    HaveInitialPassword: f.boolean(),
  },
};
