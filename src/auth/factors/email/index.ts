import { type Factor, FLOW, field, formOf, identifyByEmail } from '../factor.js';
import { signInStep } from '../stepschemas.js';

/**
 * POST /auth/email (form email): names the user who is signing in. The session becomes
 * "identified" (level 1); nothing is proven yet. A different user than the session's starts a
 * new session (new ID, new token). 400 Account Missing when no user has the address.
 */
export const emailFactor: Factor = {
  name: 'email',
  register(app, ctx) {
    app.post('/auth/email', { ...FLOW, schema: EMAIL_STEP }, async (req, reply) => {
      await identifyByEmail(req, reply, ctx, field(formOf(req), 'email', { required: true, max: 254 }));
      return reply.code(204).send();
    });
  },
};

const EMAIL_STEP = signInStep(
  'Sign-in',
  'Name the user signing in by e-mail address (proves nothing yet)',
  { email: { type: 'string', maxLength: 254 } },
  ['email'],
);
