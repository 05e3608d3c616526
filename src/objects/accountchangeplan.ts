import { f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType } from '../schema/type.js';

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
