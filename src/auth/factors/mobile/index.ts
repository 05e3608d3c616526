import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import { User } from '../../../objects/user.js';
import { enforce } from '../../../policy/decide.js';
import type { ServiceContext } from '../../../store/service.js';
import { tenantDoc } from '../../integrity.js';
import { type RateLimit, takeRequest } from '../../ratelimit.js';
import { vapidKeys } from '../../session/keys.js';
import { registerAnswers } from '../elsewhere.js';
import { type Factor, FLOW, field, formIntent, formOf, identified, jsonBody, regulated } from '../factor.js';
import { requestingDevice } from '../otp/device.js';
import { refuseUnknownToken } from '../otp/forged.js';
import { linkBase } from '../otp/message.js';
import { credentialChange, credentialChanged } from '../stepup.js';
import {
  DELETE_AUTH_ENROLL_MOBILE_ID,
  GET_AUTH_ENROLL_MOBILE,
  GET_AUTH_MOBILE,
  GET_AUTH_MOBILE_VAPID,
  POST_AUTH_ENROLL_MOBILE,
  POST_AUTH_MOBILE_APPROVE,
  POST_AUTH_MOBILE_DENY,
  POST_AUTH_MOBILE_INSPECT,
  POST_AUTH_MOBILE_START,
} from './schemas.js';
import { allowedEndpoint, pushTo, vapidSubject } from './sender.js';
import {
  addDevice,
  CHALLENGE_TTL_MS,
  type Challenge,
  challengesOf,
  devicesOf,
  dropChallenges,
  findChallenge,
  newNumber,
  newToken,
  parseToken,
  putChallenge,
  removeDevices,
  spendChallenge,
} from './store.js';

/** Pushes one user can be sent: 3 at once, then one every 30 s (push fatigue starts with volume). */
export const PUSH_PER_USER: RateLimit = { name: 'push-user', burst: 3, intervalMs: 30_000 };

/**
 * Mobile push (docs/signin.md, "Mobile push"): POST /auth/mobile/start (204; 400 no devices)
 * pushes a sign-in request, end-to-end encrypted (Web Push, RFC 8291) to every device the user
 * registered; the asking page shows a two-digit number (GET /auth/mobile) that the person types on
 * the device to approve (POST /auth/mobile/approve): number matching, so a request approved out of
 * habit or fatigue fails. A wrong number spends the request. Devices: the service's page
 * /signin/mobile registers a browser or installed web app (POST /auth/enroll/mobile, step-up).
 */
export const mobileFactor: Factor = {
  name: 'mobile',
  kind: 'possession',
  words: { label: 'a request to your phone app', proof: 'your phone' },
  form: { rank: 40, client: 'mobile' },
  settings: { title: 'Sign-in approvals on your phone', rank: 90, client: 'mobile' },
  enrolled: (_user, secret) => devicesOf(secret).length > 0,
  register(app, ctx) {
    app.get(
      '/auth/mobile/vapid',
      { config: { auth: 'none' }, schema: GET_AUTH_MOBILE_VAPID },
      async (_req, reply) =>
        reply
          .code(200)
          .type('application/json')
          .send(JSON.stringify({ PublicKey: (await vapidKeys(ctx)).publicKey })),
    );

    app.post('/auth/mobile/start', { ...FLOW, schema: POST_AUTH_MOBILE_START }, async (req, reply) => {
      const form = formOf(req);
      const who = await identified(req, reply, ctx);
      await formIntent(ctx, form, who.session);
      const devices = devicesOf(who.secret);
      if (devices.length === 0) throw new ApiError('BadRequest', 'this user has no mobile device registered');
      await takeRequest(ctx, PUSH_PER_USER, `user:${who.user.id}`);
      const { token, hash } = newToken(who.user.id);
      const now = Date.now();
      const shown = requestingDevice(who.session.data);
      const challenge: Challenge = {
        Hash: hash,
        SessionID: who.session.id,
        Number: newNumber(),
        Time: new Date(now).toISOString(),
        Expires: now + CHALLENGE_TTL_MS,
        Email: String(who.user.doc.Email ?? ''),
        Browser: shown.Browser,
        Address: shown.Address,
      };
      await putChallenge(ctx, who.user.id, challenge);
      const tenant = await tenantDoc(ctx);
      // What the device shows: who, from where; never the number (it must come from the page).
      const payload = JSON.stringify({
        Type: 'signin',
        Token: token,
        Service: String(tenant.Name || 'Gatehouse'),
        Email: challenge.Email,
        Browser: challenge.Browser,
        Address: challenge.Address,
        Time: challenge.Time,
        ExpireTime: new Date(challenge.Expires).toISOString(),
      });
      const subject = vapidSubject(ctx, linkBase(ctx, tenant));
      const ttl = Math.ceil(CHALLENGE_TTL_MS / 1000);
      const outcomes = await Promise.all(devices.map((d) => pushTo(ctx, d, payload, subject, ttl)));
      const gone = devices.filter((_d, i) => outcomes[i] === 'gone').map((d) => d.ID);
      if (gone.length > 0) await removeDevices(ctx, who.user.id, gone);
      if (!outcomes.includes('sent')) {
        await dropChallenges(ctx, who.user.id, who.session.id);
        throw new ApiError('Unavailable', 'no device could be reached; try again later', {
          headers: { 'Retry-After': '30' },
        });
      }
      return reply.code(204).send();
    });

    // The waiting page: the number to show, while the request is pending.
    app.get('/auth/mobile', { ...FLOW, schema: GET_AUTH_MOBILE }, async (req, reply) => {
      const who = await identified(req, reply, ctx);
      const now = Date.now();
      const c = challengesOf(who.secret).find((x) => x.SessionID === who.session.id && x.Expires > now);
      if (!c) throw new ApiError('NotFound', 'no sign-in request is waiting for a device');
      reply.header('Cache-Control', 'no-store');
      return reply
        .code(200)
        .type('application/json')
        .send(JSON.stringify({ Number: c.Number, ExpireTime: new Date(c.Expires).toISOString() }));
    });

    app.post('/auth/mobile/inspect', { ...FLOW, schema: POST_AUTH_MOBILE_INSPECT }, async (req, reply) => {
      const { challenge } = await checked(req, ctx, 'inspect');
      reply.header('Cache-Control', 'no-store');
      return reply
        .code(200)
        .type('application/json')
        .send(
          JSON.stringify({
            Email: challenge.Email,
            RequestTime: challenge.Time,
            ExpireTime: new Date(challenge.Expires).toISOString(),
            Device: { Browser: challenge.Browser, Address: challenge.Address },
          }),
        );
    });

    registerAnswers(app, ctx, {
      factor: 'mobile',
      approve: { url: '/auth/mobile/approve', schema: POST_AUTH_MOBILE_APPROVE },
      refuse: { url: '/auth/mobile/deny', schema: POST_AUTH_MOBILE_DENY },
      spend: async (req, action) => {
        const { challenge, userId } = await checked(req, ctx, action === 'approve' ? 'approve' : 'deny');
        return { sessionId: challenge.SessionID, userId, address: String(challenge.Address ?? '') };
      },
      ended: 'the sign-in that asked has ended',
      refused: 'a sign-in was denied on a mobile device; the asking session was ended',
    });

    registerEnrolment(app, ctx);
  },
};

/**
 * The form `token` (and, to approve, `number`): a token naming no live request is 403, charged
 * to the client address only (otp/forged.ts); a live one is checked under regulation (factor
 * `mobile`, the user per device: 429 with X-Next-Attempt). Approving and denying spend the request whatever the number: one wrong number
 * ends it, so repeated pushes cannot be approved by guessing. 403 when it does not hold.
 */
async function checked(req: FastifyRequest, ctx: ServiceContext, action: 'inspect' | 'approve' | 'deny') {
  const form = formOf(req);
  const token = field(form, 'token', { required: true, max: 200 }).trim();
  const number = action === 'approve' ? field(form, 'number', { required: true, max: 8 }).trim() : '';
  const parsed = parseToken(token);
  const userId = parsed?.userId ?? '';
  const secret = userId ? await ctx.store.getSecret(User, userId) : {};
  if (!parsed || !findChallenge(secret, parsed.secret))
    return refuseUnknownToken(req, ctx, 'sign-in request');
  let challenge: Challenge | undefined;
  await regulated(
    req,
    ctx,
    { userId, deviceId: req.principal?.deviceId },
    'mobile',
    action === 'approve' ? 'number' : 'request',
    async () => {
      if (action === 'inspect') challenge = findChallenge(secret, parsed.secret);
      else challenge = await spendChallenge(ctx, userId, parsed.secret);
      if (!challenge) return false;
      return action !== 'approve' || String(challenge.Number) === number;
    },
  );
  return { challenge: challenge as Challenge, userId };
}

const B64URL = /^[A-Za-z0-9_-]+$/;

function registerEnrolment(app: FastifyInstance, ctx: ServiceContext) {
  app.get('/auth/enroll/mobile', { schema: GET_AUTH_ENROLL_MOBILE }, async (req, reply) => {
    const p = req.principal;
    const named = (req.query as Record<string, unknown> | undefined)?.user;
    let userId = p?.userId ?? '';
    if (typeof named === 'string' && named !== '' && named !== userId) {
      if (!p) throw new ApiError('Forbidden', "only administrators may read another user's devices");
      await enforce(ctx, p, 'User.factors', { kind: 'User', id: named, userId: named });
      userId = named;
    }
    if (!userId || !(await ctx.store.get(User, userId))) throw new ApiError('NotFound', 'no such user');
    const list = devicesOf(await ctx.store.getSecret(User, userId)).map((d) => ({
      ID: d.ID,
      Name: d.Name,
      CreateTime: d.CreateTime,
    }));
    return reply.code(200).type('application/json').send(JSON.stringify(list));
  });

  app.post('/auth/enroll/mobile', { schema: POST_AUTH_ENROLL_MOBILE }, async (req, reply) => {
    const change = await credentialChange(req, ctx, 'mobile', 'set');
    const body = jsonBody(req);
    const sub = (body.Subscription ?? {}) as {
      endpoint?: unknown;
      keys?: { p256dh?: unknown; auth?: unknown };
    };
    const endpoint = typeof sub.endpoint === 'string' ? sub.endpoint : '';
    if (endpoint.length > 2048 || !allowedEndpoint(ctx.config.push.endpoints, endpoint))
      throw new ApiError(
        'InvalidField',
        'Subscription.endpoint is not on an allowed push service (push.endpoints)',
        {
          field: 'Subscription.endpoint',
        },
      );
    const p256dh = typeof sub.keys?.p256dh === 'string' ? sub.keys.p256dh : '';
    const auth = typeof sub.keys?.auth === 'string' ? sub.keys.auth : '';
    const point = B64URL.test(p256dh) ? Buffer.from(p256dh, 'base64url') : Buffer.alloc(0);
    if (point.length !== 65 || point[0] !== 4)
      throw new ApiError(
        'InvalidField',
        'Subscription.keys.p256dh must be a P-256 public key (65 bytes, base64url)',
        {
          field: 'Subscription.keys.p256dh',
        },
      );
    if (!B64URL.test(auth) || Buffer.from(auth, 'base64url').length !== 16)
      throw new ApiError('InvalidField', 'Subscription.keys.auth must be 16 bytes, base64url', {
        field: 'Subscription.keys.auth',
      });
    const name =
      typeof body.Name === 'string' && body.Name.trim() !== '' ? body.Name.trim().slice(0, 80) : 'Device';
    const added = await addDevice(ctx, change.userId, {
      Name: name,
      Endpoint: endpoint,
      P256dh: p256dh,
      Auth: auth,
    });
    if (added === 'full') throw new ApiError('Conflict', 'a user has at most 10 devices: remove one first');
    await credentialChanged(req, reply, ctx, change, 'mobile');
    return reply
      .code(201)
      .header('X-ID', added.ID)
      .type('application/json')
      .send(JSON.stringify({ ID: added.ID, Name: added.Name, CreateTime: added.CreateTime }));
  });

  app.delete<{ Params: { id: string } }>(
    '/auth/enroll/mobile/:id',
    { schema: DELETE_AUTH_ENROLL_MOBILE_ID },
    async (req, reply) => {
      const change = await credentialChange(req, ctx, 'mobile', 'remove');
      if ((await removeDevices(ctx, change.userId, [req.params.id])) === 0)
        throw new ApiError('NotFound', 'no such device');
      await credentialChanged(req, reply, ctx, change, 'mobile');
      return reply.code(204).send();
    },
  );
}
