import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import { User } from '../../../objects/user.js';
import { enforce } from '../../../policy/decide.js';
import type { ServiceContext } from '../../../store/service.js';
import { tenantDoc } from '../../integrity.js';
import { type RateLimit, takeRequest } from '../../ratelimit.js';
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
} from '../factor.js';
import { credentialChange, credentialChanged } from '../stepup.js';
import { createProvider, type PstnMode, type PstnProvider } from './provider.js';
import {
  DELETE_AUTH_ENROLL_PSTN_ID,
  DELETE_AUTH_PSTN_ID,
  GET_AUTH_ENROLL_PSTN,
  GET_AUTH_PSTN,
  POST_AUTH_ENROLL_PSTN,
  POST_AUTH_ENROLL_PSTN_ID_VERIFY,
  POST_AUTH_PSTN_ID_FINISH,
  POST_AUTH_PSTN_ID_START,
} from './schemas.js';
import {
  addDevice,
  devicesOf,
  dropCode,
  E164,
  markVerified,
  maskedNumber,
  newCode,
  type PstnDevice,
  putCode,
  removeDevice,
  spendCode,
} from './store.js';

/** Codes a user can be sent (sign-in and verification together): 3 at once, then one a minute. */
export const PSTN_PER_USER: RateLimit = { name: 'pstn-user', burst: 3, intervalMs: 60_000 };
/** Codes one number can be sent, whoever asks (a number shared by several accounts counts once). */
export const PSTN_PER_NUMBER: RateLimit = { name: 'pstn-number', burst: 3, intervalMs: 60_000 };

const message = (tenant: string, code: string, mode: PstnMode) =>
  mode === 'sms'
    ? `${code} is your ${tenant} sign-in code. It expires in 5 minutes. Do not share it.`
    : `Your ${tenant} code is ${code.split('').join(' ')}.`;

/**
 * Phone (PSTN) factor (docs/signin.md, "Phone"): a code sent by SMS or read out by a voice call
 * to one of the user's verified numbers. Sign-in: POST /auth/pstn/:id/start (204; 422 the number
 * is not verified), POST /auth/pstn/:id/finish (form code: 204; 403), DELETE /auth/pstn/:id
 * (cancel, 204). Devices: GET, POST /auth/enroll/pstn, POST /auth/enroll/pstn/:id/verify,
 * DELETE /auth/enroll/pstn/:id, with step-up like every credential.
 */
export const pstnFactor: Factor = {
  name: 'pstn',
  kind: 'possession',
  words: { label: 'a code to your phone', proof: 'a code sent to your phone' },
  form: { rank: 80, client: 'pstn' },
  settings: { title: 'Codes by text message or call', rank: 80, client: 'pstn' },
  enrolled: (_user, secret) => devicesOf(secret).some((d) => d.Verified),
  register(app, ctx) {
    const provider = createProvider(ctx.config.pstn, ctx.logger);

    // The signing-in user's phones, numbers masked, so the page can offer them.
    app.get('/auth/pstn', { ...FLOW, schema: GET_AUTH_PSTN }, async (req, reply) => {
      const who = await identified(req, reply, ctx);
      const list = devicesOf(who.secret).map((d) => ({
        ID: d.ID,
        Number: maskedNumber(d.Number),
        Mode: d.Mode,
        Verified: d.Verified,
      }));
      return reply.code(200).type('application/json').send(JSON.stringify(list));
    });

    app.post<{ Params: { id: string } }>(
      '/auth/pstn/:id/start',
      { ...FLOW, schema: POST_AUTH_PSTN_ID_START },
      async (req, reply) => {
        const form = formOf(req);
        const who = await identified(req, reply, ctx);
        await formIntent(ctx, form, who.session);
        const device = devicesOf(who.secret).find((d) => d.ID === req.params.id);
        if (!device) throw new ApiError('NotFound', 'this user has no such phone');
        if (!device.Verified)
          throw new ApiError('DeviceNotVerified', 'this phone number has not been verified yet');
        await send(req, ctx, provider, who.user.id, device, 'signin', who.session.id);
        return reply.code(204).send();
      },
    );

    app.post<{ Params: { id: string } }>(
      '/auth/pstn/:id/finish',
      { ...FLOW, schema: POST_AUTH_PSTN_ID_FINISH },
      async (req, reply) => {
        const form = formOf(req);
        const code = field(form, 'code', { required: true, max: 16 }).replace(/\s+/g, '');
        const who = await identified(req, reply, ctx);
        await formIntent(ctx, form, who.session);
        await regulated(req, ctx, attemptOf(who), 'pstn', 'code', () =>
          spendCode(
            ctx,
            who.user.id,
            { DeviceID: req.params.id, Purpose: 'signin', SessionID: who.session.id },
            code,
          ),
        );
        await proven(req, reply, ctx, who.session, 'pstn');
        return reply.code(204).send();
      },
    );

    app.delete<{ Params: { id: string } }>(
      '/auth/pstn/:id',
      { ...FLOW, schema: DELETE_AUTH_PSTN_ID },
      async (req, reply) => {
        const who = await identified(req, reply, ctx);
        await dropCode(ctx, who.user.id, req.params.id, 'signin');
        return reply.code(204).send();
      },
    );

    registerEnrolment(app, ctx, provider);
  },
};

/** Sends a fresh code to a device (limits first; the code is dropped again if sending fails). */
async function send(
  req: FastifyRequest,
  ctx: ServiceContext,
  provider: PstnProvider,
  userId: string,
  device: PstnDevice,
  purpose: 'signin' | 'verify',
  sessionId: string,
) {
  await takeRequest(ctx, PSTN_PER_USER, `user:${userId}`);
  await takeRequest(ctx, PSTN_PER_NUMBER, `number:${device.Number}`);
  const code = newCode();
  await putCode(ctx, userId, { DeviceID: device.ID, Purpose: purpose, SessionID: sessionId }, code);
  const tenant = String((await tenantDoc(ctx)).Name || 'Gatehouse');
  try {
    await provider.send(device.Number, device.Mode, message(tenant, code, device.Mode));
  } catch (err) {
    await dropCode(ctx, userId, device.ID, purpose);
    req.log.error({ err: { message: (err as Error).message } }, 'the code could not be sent to the phone');
    throw new ApiError('Unavailable', 'the code could not be sent; try again later', {
      headers: { 'Retry-After': '60' },
    });
  }
}

/** The session (or key) a verification code is bound to: a code sent to one is not for another. */
const binding = (req: FastifyRequest) => req.principal?.sessionId ?? `key:${req.principal?.keyId ?? ''}`;

function registerEnrolment(app: FastifyInstance, ctx: ServiceContext, provider: PstnProvider) {
  app.get('/auth/enroll/pstn', { schema: GET_AUTH_ENROLL_PSTN }, async (req, reply) => {
    const p = req.principal;
    const named = (req.query as Record<string, unknown> | undefined)?.user;
    let userId = p?.userId ?? '';
    if (typeof named === 'string' && named !== '' && named !== userId) {
      if (!p) throw new ApiError('Forbidden', "only administrators may read another user's phones");
      await enforce(ctx, p, 'User.factors', { kind: 'User', id: named, userId: named });
      userId = named;
    }
    if (!userId || !(await ctx.store.get(User, userId))) throw new ApiError('NotFound', 'no such user');
    const list = devicesOf(await ctx.store.getSecret(User, userId));
    return reply.code(200).type('application/json').send(JSON.stringify(list));
  });

  // Adds a number (unverified) and sends it a verification code.
  app.post('/auth/enroll/pstn', { schema: POST_AUTH_ENROLL_PSTN }, async (req, reply) => {
    const change = await credentialChange(req, ctx, 'pstn', 'set');
    const body = jsonBody(req);
    const number = typeof body.Number === 'string' ? body.Number.replace(/[\s().-]/g, '') : '';
    if (!E164.test(number))
      throw new ApiError('InvalidField', 'Number must be in E.164 form: + country code and number', {
        field: 'Number',
      });
    const mode = body.Mode ?? 'sms';
    if (mode !== 'sms' && mode !== 'voice')
      throw new ApiError('InvalidField', 'Mode must be sms or voice', { field: 'Mode' });
    const added = await addDevice(ctx, change.userId, number, mode);
    if (added === 'duplicate')
      throw new ApiError('Conflict', 'this number is already one of the user’s phones');
    if (added === 'full') throw new ApiError('Conflict', 'a user has at most 5 phones: remove one first');
    try {
      await send(req, ctx, provider, change.userId, added, 'verify', binding(req));
    } catch (err) {
      await removeDevice(ctx, change.userId, added.ID);
      throw err;
    }
    return reply.code(201).header('X-ID', added.ID).type('application/json').send(JSON.stringify(added));
  });

  app.post<{ Params: { id: string } }>(
    '/auth/enroll/pstn/:id/verify',
    { schema: POST_AUTH_ENROLL_PSTN_ID_VERIFY },
    async (req, reply) => {
      const change = await credentialChange(req, ctx, 'pstn', 'set');
      const code = jsonBody(req).Code;
      if (typeof code !== 'string')
        throw new ApiError('InvalidField', 'Code must be a string', { field: 'Code' });
      const secret = await ctx.store.getSecret(User, change.userId);
      if (!devicesOf(secret).some((d) => d.ID === req.params.id))
        throw new ApiError('NotFound', 'no such phone');
      const at = { userId: change.userId, deviceId: req.principal?.deviceId };
      await regulated(req, ctx, at, 'pstn_verify', 'code', () =>
        spendCode(
          ctx,
          change.userId,
          { DeviceID: req.params.id, Purpose: 'verify', SessionID: binding(req) },
          code.replace(/\s+/g, ''),
        ),
      );
      await markVerified(ctx, change.userId, req.params.id);
      await credentialChanged(req, reply, ctx, change, 'pstn');
      return reply.code(204).send();
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/auth/enroll/pstn/:id',
    { schema: DELETE_AUTH_ENROLL_PSTN_ID },
    async (req, reply) => {
      const change = await credentialChange(req, ctx, 'pstn', 'remove');
      if (!(await removeDevice(ctx, change.userId, req.params.id)))
        throw new ApiError('NotFound', 'no such phone');
      await credentialChanged(req, reply, ctx, change, 'pstn');
      return reply.code(204).send();
    },
  );
}
