import { ApiError } from '../../../core/errors.js';
import { err, type RouteSchema } from '../../../core/routeschema.js';
import { User } from '../../../objects/user.js';
import { provenLevel } from '../../integrity.js';
import { verifyIntent } from '../../intents.js';
import { intentDevice } from '../../session/authenticator.js';
import { completeSignIn } from '../../session/complete.js';
import { mutateSession, requestSession, sessionById } from '../../session/sessions.js';
import { type Factor, FLOW } from '../factor.js';

/**
 * POST /auth/boost, JSON body IntegrityLevelChangeIntent {"Intent": "<signed intent>"} (the intent
 * another session received with its 401). Raises that session to the intent's level, from a
 * session that has at least that level. 204; 400 malformed or expired; 401 this session's level
 * is lower; 403 other user (and not an administrator) or the intent's user is not the session's;
 * 409 the session's device is not the intent's, or the session is gone.
 */
export const boostFactor: Factor = {
  name: 'boost',
  register(app, ctx) {
    app.post('/auth/boost', { ...FLOW, schema: BOOST }, async (req, reply) => {
      // {"Intent": "<jws>"} (also the whole 401 error body, which has "Intent"), or the bare JSON string.
      const body = req.body;
      if (typeof body !== 'string' && (typeof body !== 'object' || body === null || Array.isArray(body)))
        throw new ApiError(
          'BadRequest',
          'the body must be a JSON IntegrityLevelChangeIntent: {"Intent": "..."}',
        );
      const raw =
        typeof body === 'string'
          ? body
          : ((body as Record<string, unknown>).Intent ?? (body as Record<string, unknown>).intent);
      const intent = await verifyIntent(ctx, raw, 'Intent');
      if (intent.sid === '')
        throw new ApiError('InvalidIntent', 'the intent names no session to raise', { field: 'Intent' });
      const { session: me } = await requestSession(req, ctx);
      if (!me || me.userId === '')
        throw new ApiError(
          'InsufficientIntegrity',
          'boosting needs a signed-in session with at least the target level',
        );
      // What the booster has proven itself: an activation code (an invitation) lends no level.
      const mine = provenLevel(me);
      if (mine < intent.lvl)
        throw new ApiError(
          'InsufficientIntegrity',
          `this session has proven level ${mine}; the intent needs ${intent.lvl}`,
        );
      const target = await sessionById(ctx, intent.sid);
      if (target && target.userId !== me.userId) {
        const meUser = await ctx.store.get(User, me.userId);
        if (meUser?.doc.Admin !== true)
          throw new ApiError(
            'Forbidden',
            'the other session belongs to another user; only administrators may raise it',
          );
      }
      if (target && intent.uid !== target.userId)
        throw new ApiError('Forbidden', "the intent's user is not the other session's user");
      if (!target) throw new ApiError('SessionConflict', 'the other session has ended or does not exist');
      if (intentDevice(target.deviceId) !== intent.did)
        throw new ApiError('SessionConflict', "the intent's device is not the other session's device");
      if (target.id === me.id) throw new ApiError('SessionConflict', 'a session cannot raise itself');
      if (target.level < intent.lvl) {
        // A level lent is a sign-in step too: the one completion, for the session raised.
        const checked = await completeSignIn(ctx, target, { factor: '', floor: { BoostLevel: intent.lvl } });
        // The holder gets a new token at its next request (its level changed: fixation defence).
        const done = await mutateSession(
          ctx,
          target.id,
          (cur) => ({
            ...cur,
            data: {
              ...cur.data,
              ...checked,
              BoostLevel: Math.max(cur.data.BoostLevel ?? 0, intent.lvl),
              RotatePending: true,
            },
          }),
          { rotate: false },
        );
        if (!done) throw new ApiError('SessionConflict', 'the other session ended while being raised');
      }
      return reply.code(204).send();
    });
  },
};

const BOOST: RouteSchema = {
  tags: ['Sign-in: boost'],
  summary: 'Lend the caller’s proven level to the session waiting on an intent (its Intent, JSON)',
  body: {
    required: true,
    content: {
      'application/json': {
        schema: {
          oneOf: [
            { type: 'object', properties: { Intent: { type: 'string' } }, required: ['Intent'] },
            { type: 'string' },
          ],
        },
      },
    },
  },
  response: {
    204: { description: 'The waiting session is raised' },
    400: err('A bad intent'),
    401: err('Not signed in, or not at the level asked'),
    403: err('Not allowed to raise that session'),
  },
};
