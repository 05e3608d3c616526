import { ApiError } from '../../../api/errors.js';
import { User } from '../../../objects/user.js';
import { userUsable } from '../../apikeys.js';
import { replaceSession, requestSession, updateRequestSession } from '../../session/sessions.js';
import { type Factor, FLOW, field, formOf } from '../factor.js';

/**
 * POST /auth/email (form email): names the user who is signing in. The session becomes
 * "identified" (level 1); nothing is proven yet. A different user than the session's starts a
 * new session (new ID, new token).
 */
export const emailFactor: Factor = {
  name: 'email',
  register(app, ctx) {
    app.post('/auth/email', FLOW, async (req, reply) => {
      const email = field(formOf(req), 'email', { required: true, max: 254 }).trim().toLowerCase();
      const found = await ctx.store.findByKey(User, 'Email', email);
      if (!found) throw new ApiError('AccountMissing', 'no user has this e-mail address', { field: 'email' });
      if (!userUsable(found.doc)) throw new ApiError('Forbidden', 'this user may not sign in');
      const { session } = await requestSession(req, ctx);
      if (session && session.userId === '')
        await updateRequestSession(req, reply, ctx, { ...session, userId: found.id, factors: [] });
      else if (!session || session.userId !== found.id) await replaceSession(req, reply, ctx, found.id);
      return reply.code(204).send();
    });
  },
};
