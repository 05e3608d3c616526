import { checkEmail, checkUnixName, checkUrl, f } from '../schema/fields.js';
import { ALL_OPS, FULL, type ObjectType, READ } from '../schema/type.js';

export const User: ObjectType = {
  kind: 'User',
  // Other instances cache validated keys with their user (src/auth/keycache.ts).
  cachedElsewhere: 'changes',
  path: 'users',
  identity: 'generated',
  ops: ALL_OPS,
  grants: { user: { list: 'own', get: 'own' }, audit: READ, sync: FULL },
  fieldRules: { Admin: 'admin' },
  ownerField: 'ID',
  unique: ['Email', 'UserName'],
  fields: {
    Email: f.string({ check: checkEmail, maxLength: 254, doc: 'Primary e-mail address; unique' }),
    OtherEmails: f.strings({
      check: checkEmail,
      maxItems: 16,
      doc: 'Further verified addresses of the user',
    }),
    UserName: f.string({ check: checkUnixName, maxLength: 32, doc: 'Unix user name; unique' }),
    Name: f.object(
      {
        FullName: f.string({ maxLength: 256 }),
        GivenName: f.string({ maxLength: 256 }),
        FamilyName: f.string({ maxLength: 256 }),
      },
      { omitZero: true, doc: 'Display names; {} when unset' },
    ),
    Icon: f.object(
      { URL: f.string({ check: checkUrl, maxLength: 2048 }) },
      { omitZero: true, doc: 'Avatar; {} when unset' },
    ),
    Active: f.boolean({ doc: 'The user has activated the account (POST /auth/activate)' }),
    Disabled: f.boolean({ doc: 'Disabled users cannot sign in and their API keys stop working' }),
    Admin: f.boolean({ doc: 'Tenant administrator' }),
    SuspendAfter: f.timestamp({ doc: 'The user is suspended from this time on (zero: never)' }),
    SuspendBefore: f.timestamp({ doc: 'The user is suspended until this time (zero: not)' }),
    HavePassword: f.boolean({ readOnly: true }),
    HavePIN: f.boolean({ readOnly: true }),
    HaveTOTPSecret: f.boolean({ readOnly: true }),
    MergedInto: f.string({
      readOnly: true,
      maxLength: 64,
      doc: 'Set when this user was merged into another',
    }),
  },
};
