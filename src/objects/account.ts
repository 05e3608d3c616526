import { f } from '../schema/fields.js';
import { type ObjectType, READ, READ_OPS } from '../schema/type.js';

/** An account of a user in an app; read-only, maintained by the service. */
export const Account: ObjectType = {
  kind: 'Account',
  path: 'accounts',
  identity: 'generated',
  ops: READ_OPS,
  grants: { audit: READ },
  fields: {
    UserID: f.string({ maxLength: 64 }),
    AppID: f.string({ maxLength: 64 }),
    Login: f.string({ maxLength: 256 }),
    State: f.enum(['active', 'disabled']),
    HaveInitialPassword: f.boolean(),
  },
};
