import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import { User } from '../../../objects/user.js';
import { enforce } from '../../../policy/decide.js';
import type { Doc } from '../../../schema/fields.js';
import type { ServiceContext } from '../../../store/service.js';
import { tenantDoc } from '../../integrity.js';
import { type RateLimit, takeRequest } from '../../ratelimit.js';
import { requestSession, sessionById } from '../../session/sessions.js';
import { registerAnswers } from '../elsewhere.js';
import { type Factor, FLOW, field, formIntent, formOf, identified, regulated } from '../factor.js';
import { credentialChange, credentialChanged } from '../stepup.js';
import { requestingDevice } from './device.js';
import { refuseUnknownToken } from './forged.js';
import {
  addLink,
  dropLink,
  findLink,
  LINK_TTL_MS,
  newToken,
  type PendingLink,
  parseToken,
  spendLink,
} from './links.js';
import { createMailer } from './mailer.js';
import { linkBase, linkMessage } from './message.js';
import {
  DELETE_AUTH_ENROLL_OTP,
  GET_AUTH_ENROLL_OTP,
  POST_AUTH_OTP_FINISH,
  POST_AUTH_OTP_INSPECT,
  POST_AUTH_OTP_REFUSE,
  POST_AUTH_OTP_START,
  PUT_AUTH_ENROLL_OTP,
} from './schemas.js';

/** Links a user can be sent: 3 at once, then one a minute (whoever asks, from wherever). */
export const OTP_PER_USER: RateLimit = { name: 'otp-user', burst: 3, intervalMs: 60_000 };
/** Links one address can receive (a user's several addresses count apart): as above. */
export const OTP_PER_ADDRESS: RateLimit = { name: 'otp-email', burst: 3, intervalMs: 60_000 };
/** Links one client address can ask for, across users. */
export const OTP_PER_CLIENT: RateLimit = { name: 'otp-client', burst: 10, intervalMs: 30_000 };

/** The user's verified addresses: the primary one, then the others (User.OtherEmails). */
export function addressesOf(user: Doc): string[] {
  const other = Array.isArray(user.OtherEmails) ? (user.OtherEmails as unknown[]).map(String) : [];
  return [String(user.Email ?? ''), ...other].filter((a) => a !== '').map((a) => a.toLowerCase());
}

const enabled = (user: Doc, secret: Doc) => secret.OtpEnabled === true && addressesOf(user).length > 0;

/** "a•••@example.com": enough to recognise an address on the page that asked, not to harvest it. */
const masked = (email: string) => {
  const at = email.lastIndexOf('@');
  return at <= 0 ? '•••' : `${email[0]}•••${email.slice(at)}`;
};

/**
 * The e-mail link (docs/signin.md, "E-mail links"). POST /auth/otp/start (form intent, optional
 * email) sends a link to one of the signing-in user's verified addresses. Whoever opens it sees
 * which device asked (browser, address, approximate position) and approves (POST /auth/otp/finish)
 * or refuses (POST /auth/otp/refuse) with the link's token; approving raises the session that
 * asked, never the device the link is opened on; refusing ends that session. The waiting page
 * learns it from the event stream's Auth kind. Turned on per user in the security settings
 * (PUT / DELETE /auth/enroll/otp, with step-up like every credential).
 */
export const otpFactor: Factor = {
  name: 'otp',
  kind: 'possession',
  words: { label: 'an e-mail link', proof: 'a link sent to your e-mail' },
  form: { rank: 70, client: 'otp' },
  settings: { title: 'Sign-in links by e-mail', rank: 70, client: 'otp' },
  enrolled: enabled,
  register(app, ctx) {
    const mailer = createMailer(ctx.config.mail, ctx.logger);
    app.addHook('onClose', async () => mailer.close());

    app.post('/auth/otp/start', { ...FLOW, schema: POST_AUTH_OTP_START }, async (req, reply) => {
      const form = formOf(req);
      const who = await identified(req, reply, ctx);
      await formIntent(ctx, form, who.session);
      if (!enabled(who.user.doc, who.secret))
        throw new ApiError('Conflict', 'sign-in links by e-mail are not turned on for this account');
      const addresses = addressesOf(who.user.doc);
      const asked = field(form, 'email', { max: 254 })?.trim().toLowerCase();
      if (asked !== undefined && !addresses.includes(asked))
        throw new ApiError('InvalidField', "email must be one of the user's verified addresses", {
          field: 'email',
        });
      const email = asked ?? (addresses[0] as string);
      await takeRequest(ctx, OTP_PER_CLIENT, req.ip);
      await takeRequest(ctx, OTP_PER_USER, `user:${who.user.id}`);
      await takeRequest(ctx, OTP_PER_ADDRESS, `email:${email}`);

      const { token, hash } = newToken(who.user.id);
      const now = Date.now();
      const link: PendingLink = {
        Hash: hash,
        SessionID: who.session.id,
        Email: email,
        Time: new Date(now).toISOString(),
        Expires: now + LINK_TTL_MS,
        Device: requestingDevice(who.session.data),
      };
      await addLink(ctx, who.user.id, link);
      const tenant = await tenantDoc(ctx);
      try {
        await mailer.send(
          linkMessage(String(tenant.Name || 'Gatehouse'), email, link, linkBase(ctx, tenant), token),
        );
      } catch (err) {
        await dropLink(ctx, who.user.id, hash);
        req.log.error({ err: { message: (err as Error).message } }, 'the sign-in link could not be sent');
        throw new ApiError('Unavailable', 'the e-mail could not be sent; try again later', {
          headers: { 'Retry-After': '60' },
        });
      }
      reply.header('Cache-Control', 'no-store');
      return reply
        .code(200)
        .type('application/json')
        .send(JSON.stringify({ Email: masked(email), ExpireTime: new Date(link.Expires).toISOString() }));
    });

    app.post('/auth/otp/inspect', { ...FLOW, schema: POST_AUTH_OTP_INSPECT }, async (req, reply) => {
      const { link, userId } = await checked(req, ctx, false);
      const user = await ctx.store.get(User, userId);
      const { session: mine } = await requestSession(req, ctx);
      const asking = await sessionById(ctx, link.SessionID);
      reply.header('Cache-Control', 'no-store');
      return reply
        .code(200)
        .type('application/json')
        .send(
          JSON.stringify({
            Email: String(user?.doc.Email ?? ''),
            SentTo: link.Email,
            RequestTime: link.Time,
            ExpireTime: new Date(link.Expires).toISOString(),
            Device: link.Device,
            SameDevice: asking !== undefined && mine !== undefined && mine.deviceId === asking.deviceId,
          }),
        );
    });

    registerAnswers(app, ctx, {
      factor: 'otp',
      approve: { url: '/auth/otp/finish', schema: POST_AUTH_OTP_FINISH },
      refuse: { url: '/auth/otp/refuse', schema: POST_AUTH_OTP_REFUSE },
      spend: async (req) => {
        const { link, userId } = await checked(req, ctx, true);
        return { sessionId: link.SessionID, userId, address: String(link.Device.Address ?? '') };
      },
      ended: 'the sign-in that asked for this link has ended',
      refused: 'a sign-in by e-mail link was refused by the mailbox owner; the asking session was ended',
    });

    registerEnrolment(app, ctx);
  },
};

/**
 * The form `token`: 403 when it is not a live link (charged to the client address only, see
 * forged.ts); a live one is checked under regulation like every code (the link's user, per
 * device: 429 with X-Next-Attempt). `spend` removes the link in the same step.
 */
async function checked(req: FastifyRequest, ctx: ServiceContext, spend: boolean) {
  const token = field(formOf(req), 'token', { required: true, max: 200 }).trim();
  const parsed = parseToken(token);
  const userId = parsed?.userId ?? '';
  const secret = userId ? await ctx.store.getSecret(User, userId) : {};
  if (!parsed || !findLink(secret, parsed.secret)) return refuseUnknownToken(req, ctx, 'sign-in link');
  const { deviceId } = await requestSession(req, ctx);
  let link: PendingLink | undefined;
  await regulated(req, ctx, { userId, deviceId }, 'otp', 'sign-in link', async () => {
    link = spend ? await spendLink(ctx, userId, parsed.secret) : findLink(secret, parsed.secret);
    return link !== undefined;
  });
  return { link: link as PendingLink, userId };
}

/** GET (state), PUT (turn on), DELETE (turn off) /auth/enroll/otp; changes need step-up. */
function registerEnrolment(app: FastifyInstance, ctx: ServiceContext) {
  app.get('/auth/enroll/otp', { schema: GET_AUTH_ENROLL_OTP }, async (req, reply) => {
    const p = req.principal;
    const named = (req.query as Record<string, unknown> | undefined)?.user;
    let userId = p?.userId ?? '';
    if (typeof named === 'string' && named !== '' && named !== userId) {
      if (!p) throw new ApiError('Forbidden', "only administrators may read another user's settings");
      await enforce(ctx, p, 'User.factors', { kind: 'User', id: named, userId: named });
      userId = named;
    }
    const user = userId ? await ctx.store.get(User, userId) : undefined;
    if (!user) throw new ApiError('NotFound', 'no such user');
    const secret = await ctx.store.getSecret(User, userId);
    return reply
      .code(200)
      .type('application/json')
      .send(JSON.stringify({ Enabled: enabled(user.doc, secret), Addresses: addressesOf(user.doc) }));
  });

  app.put('/auth/enroll/otp', { schema: PUT_AUTH_ENROLL_OTP }, async (req, reply) => {
    const change = await credentialChange(req, ctx, 'otp', 'set');
    const user = await ctx.store.get(User, change.userId);
    if (!user || addressesOf(user.doc).length === 0)
      throw new ApiError('Conflict', 'the user has no e-mail address to send links to');
    await ctx.store.systemPut(User, change.userId, (doc, s) =>
      doc ? { doc, secret: { ...s, OtpEnabled: true } } : null,
    );
    await credentialChanged(req, reply, ctx, change, 'otp');
    return reply.code(204).send();
  });

  app.delete('/auth/enroll/otp', { schema: DELETE_AUTH_ENROLL_OTP }, async (req, reply) => {
    const change = await credentialChange(req, ctx, 'otp', 'remove');
    await ctx.store.systemPut(User, change.userId, (doc, s) => {
      if (!doc) return null;
      const { OtpEnabled: _e, OtpLinks: _l, ...rest } = s;
      return { doc, secret: rest };
    });
    await credentialChanged(req, reply, ctx, change, 'otp');
    return reply.code(204).send();
  });
}
