import { ApiError } from '../core/errors.js';
import { argon2Hash } from '../core/hashing.js';
import { f } from '../schema/fields.js';
import { ALL_OPS, type ObjectType } from '../schema/type.js';

export const ActivationCode: ObjectType = {
  kind: 'ActivationCode',
  path: 'activationcodes',
  identity: 'generated',
  ops: ALL_OPS,
  // A code bound to a user (or to a group's members) enrols that user's account.
  fieldRules: { UserID: 'admin', GroupID: 'admin' },
  fields: {
    Description: f.string({ maxLength: 1024 }),
    UserID: f.string({
      maxLength: 64,
      doc: 'Only this user may use the code, while not active or without factors (empty: only new users, not active and without factors; docs/signin.md)',
    }),
    GroupID: f.string({
      maxLength: 64,
      ref: 'Group',
      doc: 'With no UserID: only members of this group (approved or active, not a pending request) may use the code; empty: any new user',
    }),
    MaxUses: f.integer({
      min: 0,
      max: 1_000_000,
      default: 1,
      doc: 'How many times the code may be used (0: unlimited)',
    }),
    Uses: f.integer({ readOnly: true }),
    ExpireTime: f.timestamp({ doc: 'The code stops working at this time (zero: never)' }),
    HaveCode: f.boolean({ readOnly: true, doc: 'A code has been set (the code itself is write-only)' }),
  },
  writeOnly: { Code: f.string({ maxLength: 256, doc: 'The code; stored only as an argon2id hash' }) },
  async prepare(ctx) {
    const code = ctx.input.Code;
    if (code === undefined || code === null) return;
    if (typeof code !== 'string' || code.length < 6) {
      throw new ApiError('InvalidField', 'Code must be a string of at least 6 characters', { field: 'Code' });
    }
    ctx.secret.CodeHash = await argon2Hash(code);
    ctx.doc.HaveCode = true;
  },
};
