import { ApiError } from '../../core/errors.js';
import { User } from '../../objects/user.js';
import { tenantDoc } from '../integrity.js';
import type { Factor } from './factor.js';
import { hashSecret, verifySecret } from './secrets.js';
import type { FactorWords, FieldSpec, SettingsForm, SignInForm } from './steps.js';
/** A secret the user knows (password, PIN): one hash in the user's hidden state and a Have* flag. */
export interface KnowledgeSpec {
  name: 'password' | 'pin';
  tag: string;
  /** Form field of the sign-in step (password: "password", PIN: "code"). */
  formField: string;
  /** JSON field of the enrollment body. */
  jsonField: string;
  hashKey: string;
  flag: string;
  what: string;
  /** A message when the new secret is unacceptable. */
  check(value: string, tenant: Record<string, unknown>): string | undefined;
  words: FactorWords;
  /** The sign-in form's input and button. */
  field: Omit<FieldSpec, 'name' | 'maxLength'>;
  form: SignInForm;
  /** Its card on the settings page (the secret's `flag` is filled in from `flag`). */
  settings: Omit<SettingsForm, 'secret'> & { secret?: Omit<NonNullable<SettingsForm['secret']>, 'flag'> };
}

function settingsOf(spec: KnowledgeSpec): SettingsForm {
  const { secret, ...rest } = spec.settings;
  return secret ? { ...rest, secret: { ...secret, flag: spec.flag } } : rest;
}

/**
 * POST /auth/<name> (form intent, <formField>): 204; 403 incorrect; 429 backing off. PUT
 * /auth/enroll/<name> {<jsonField>} sets or changes it, DELETE removes it (?user=<id> for
 * administrators). Served by the flow (./flow.ts).
 */
export function knowledgeFactor(spec: KnowledgeSpec): Factor {
  return {
    name: spec.name,
    kind: 'knowledge',
    tag: spec.tag,
    enrolled: (user) => user[spec.flag] === true,
    words: spec.words,
    form: spec.form,
    settings: settingsOf(spec),
    prove: {
      summary: `Prove the ${spec.what}`,
      what: spec.what,
      fields: [{ ...spec.field, name: spec.formField, maxLength: 1024 }],
      check: async (_ctx, who, values) =>
        verifySecret(who.secret[spec.hashKey], values[spec.formField] ?? ''),
    },
    enroll: [
      {
        method: 'PUT',
        op: 'set',
        summary: `Set or change the ${spec.what}`,
        body: { properties: { [spec.jsonField]: { type: 'string' } }, required: [spec.jsonField] },
        async write(ctx, { userId }, body) {
          const value = body[spec.jsonField] ?? '';
          const bad = spec.check(value, await tenantDoc(ctx));
          if (bad) throw new ApiError('InvalidField', `${spec.jsonField} ${bad}`, { field: spec.jsonField });
          const h = await hashSecret(value);
          await ctx.store.systemPut(User, userId, (doc, secret) => {
            if (!doc) throw new ApiError('NotFound', `User ${userId} does not exist`);
            return { doc: { ...doc, [spec.flag]: true }, secret: { ...secret, [spec.hashKey]: h } };
          });
          return undefined;
        },
      },
      {
        method: 'DELETE',
        op: 'remove',
        summary: `Remove the ${spec.what} (reset)`,
        // The flag goes false and the hash is forgotten.
        async write(ctx, { userId }) {
          await ctx.store.systemPut(User, userId, (doc, secret) => {
            if (!doc) throw new ApiError('NotFound', `User ${userId} does not exist`);
            const { [spec.hashKey]: _, ...rest } = secret;
            return { doc: { ...doc, [spec.flag]: false }, secret: rest };
          });
          return undefined;
        },
      },
    ],
  };
}
