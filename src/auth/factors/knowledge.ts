import { ApiError } from '../../core/errors.js';
import { User } from '../../objects/user.js';
import type { ServiceContext } from '../../store/service.js';
import { tenantDoc } from '../integrity.js';
import {
  attemptOf,
  type Factor,
  FLOW,
  field,
  formIntent,
  formOf,
  identified,
  jsonBody,
  proven,
  regulated,
} from './factor.js';
import { hashSecret, verifySecret } from './secrets.js';
import { enrollment, jsonFields, signInStep } from './stepschemas.js';
import { credentialChange, credentialChanged } from './stepup.js';

/** A secret the user knows (password, PIN): one hash in the user's hidden state and a Have* flag. */
export interface KnowledgeSpec {
  name: 'password' | 'pin';
  /** Form field of the sign-in step (password: "password", PIN: "code"). */
  formField: string;
  /** JSON field of the enrollment body. */
  jsonField: string;
  hashKey: string;
  flag: string;
  what: string;
  /** A message when the new secret is unacceptable. */
  check(value: string, tenant: Record<string, unknown>): string | undefined;
}

export function knowledgeFactor(spec: KnowledgeSpec): Factor {
  return {
    name: spec.name,
    kind: 'knowledge',
    enrolled: (user) => user[spec.flag] === true,
    register(app, ctx: ServiceContext) {
      // Sign-in step: form intent (optional), secret. 204; 403 incorrect; 429 backing off.
      app.post(`/auth/${spec.name}`, { ...FLOW, schema: stepSchema(spec) }, async (req, reply) => {
        const form = formOf(req);
        const given = field(form, spec.formField, { required: true, max: 1024 });
        const who = await identified(req, reply, ctx, form);
        await formIntent(ctx, form, who.session);
        await regulated(req, ctx, attemptOf(who), spec.name, spec.what, () =>
          verifySecret(who.secret[spec.hashKey], given),
        );
        await proven(req, reply, ctx, who.session, spec.name);
        return reply.code(204).send();
      });

      // Enrollment: set or change (JSON {<jsonField>}); ?user=<id> for administrators.
      app.put(`/auth/enroll/${spec.name}`, { schema: setSchema(spec) }, async (req, reply) => {
        const change = await credentialChange(req, ctx, spec.name, 'set');
        const { userId } = change;
        const value = jsonBody(req)[spec.jsonField];
        if (typeof value !== 'string')
          throw new ApiError('InvalidField', `${spec.jsonField} must be a string`, { field: spec.jsonField });
        const tenant = await tenantDoc(ctx);
        const bad = spec.check(value, tenant);
        if (bad) throw new ApiError('InvalidField', `${spec.jsonField} ${bad}`, { field: spec.jsonField });
        const h = await hashSecret(value);
        await ctx.store.systemPut(User, userId, (doc, secret) => {
          if (!doc) throw new ApiError('NotFound', `User ${userId} does not exist`);
          return { doc: { ...doc, [spec.flag]: true }, secret: { ...secret, [spec.hashKey]: h } };
        });
        await credentialChanged(req, reply, ctx, change, spec.name);
        return reply.code(204).send();
      });

      // Removal (reset): the flag goes false and the hash is forgotten.
      app.delete(`/auth/enroll/${spec.name}`, { schema: removeSchema(spec) }, async (req, reply) => {
        const change = await credentialChange(req, ctx, spec.name, 'remove');
        const { userId } = change;
        await ctx.store.systemPut(User, userId, (doc, secret) => {
          if (!doc) throw new ApiError('NotFound', `User ${userId} does not exist`);
          const { [spec.hashKey]: _, ...rest } = secret;
          return { doc: { ...doc, [spec.flag]: false }, secret: rest };
        });
        await credentialChanged(req, reply, ctx, change, spec.name);
        return reply.code(204).send();
      });
    },
  };
}

const tagOf = (spec: KnowledgeSpec) => (spec.name === 'pin' ? 'Sign-in: PIN' : 'Sign-in: password');
const stepSchema = (spec: KnowledgeSpec) =>
  signInStep(tagOf(spec), `Prove the ${spec.what}`, { [spec.formField]: { type: 'string' } }, [
    spec.formField,
  ]);
const setSchema = (spec: KnowledgeSpec) =>
  enrollment(tagOf(spec), `Set or change the ${spec.what}`, {
    body: jsonFields({ [spec.jsonField]: { type: 'string' } }, [spec.jsonField]),
  });
const removeSchema = (spec: KnowledgeSpec) => enrollment(tagOf(spec), `Remove the ${spec.what} (reset)`);
