import * as OTPAuth from 'otpauth';
import QRCode from 'qrcode';
import { ApiError } from '../../../core/errors.js';
import { formBody } from '../../../core/routeschema.js';
import { User } from '../../../objects/user.js';
import type { ServiceContext } from '../../../store/service.js';
import { tenantDoc } from '../../integrity.js';
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
import { decryptSecret, encryptSecret } from '../secrets.js';
import { enrollment, jsonObject, signInStep } from '../stepschemas.js';
import { credentialChange, credentialChanged } from '../stepup.js';

/** RFC 6238 defaults, which every authenticator app (and oathtool --totp) uses. */
const PERIOD = 30;
const DIGITS = 6;
/** One step either side, for clock drift. */
const WINDOW = 1;

const aad = (userId: string) => `totp:${userId}`;

/** The time step a code matches, or undefined. */
export function matchStep(base32: string, code: string, now = Date.now()): number | undefined {
  if (!/^[0-9]{6}$/.test(code)) return undefined;
  const secret = OTPAuth.Secret.fromBase32(base32);
  const delta = OTPAuth.TOTP.validate({
    token: code,
    secret,
    digits: DIGITS,
    period: PERIOD,
    window: WINDOW,
    timestamp: now,
  });
  return delta === null ? undefined : Math.floor(now / 1000 / PERIOD) + delta;
}

async function checkCode(
  ctx: ServiceContext,
  userId: string,
  code: string,
  pending: boolean,
): Promise<boolean> {
  const secret = await ctx.store.getSecret(User, userId);
  const box = secret[pending ? 'TOTPPending' : 'TOTPSecret'];
  if (typeof box !== 'string') return false;
  const step = matchStep(await decryptSecret(ctx, box, aad(userId)), code);
  if (step === undefined) return false;
  // A code is accepted once: replaying it (or an older one) within its window fails.
  let fresh = false;
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const last = typeof s.TOTPLastStep === 'number' ? s.TOTPLastStep : -1;
    fresh = step > last;
    if (!fresh) return { doc };
    if (!pending) return { doc, secret: { ...s, TOTPLastStep: step } };
    const { TOTPPending: p, ...rest } = s;
    return { doc: { ...doc, HaveTOTPSecret: true }, secret: { ...rest, TOTPSecret: p, TOTPLastStep: step } };
  });
  return fresh;
}

/**
 * POST /auth/totp (form code): a code from an authenticator app. Enrollment: POST
 * /auth/enroll/totp starts (secret, otpauth URI, QR code), POST /auth/enroll/totp/confirm {"Code"}
 * finishes, DELETE /auth/enroll/totp removes. The secret is kept AES-256-GCM encrypted.
 */
export const totpFactor: Factor = {
  name: 'totp',
  kind: 'possession',
  enrolled: (user) => user.HaveTOTPSecret === true,
  register(app, ctx) {
    app.post('/auth/totp', { ...FLOW, schema: TOTP_STEP }, async (req, reply) => {
      const form = formOf(req);
      const code = field(form, 'code', { required: true, max: 16 }).replace(/\s+/g, '');
      const who = await identified(req, reply, ctx, form);
      await formIntent(ctx, form, who.session);
      await regulated(req, ctx, attemptOf(who), 'totp', 'TOTP code', () =>
        checkCode(ctx, who.user.id, code, false),
      );
      await proven(req, reply, ctx, who.session, 'totp');
      return reply.code(204).send();
    });

    app.post('/auth/enroll/totp', { schema: TOTP_GENERATE }, async (req, reply) => {
      // An administrator may provision a user's authenticator (?user=): the secret goes to them.
      // Only a pending secret is stored here; the confirmation replaces the enrolled one.
      const { userId } = await credentialChange(req, ctx, 'totp', 'set');
      const user = await ctx.store.get(User, userId);
      const tenant = await tenantDoc(ctx);
      const secret = new OTPAuth.Secret({ size: 20 });
      const totp = new OTPAuth.TOTP({
        issuer: String(tenant.Name || 'Gatehouse'),
        label: String(user?.doc.Email || user?.doc.UserName || userId),
        algorithm: 'SHA1',
        digits: DIGITS,
        period: PERIOD,
        secret,
      });
      const box = await encryptSecret(ctx, secret.base32, aad(userId));
      await ctx.store.systemPut(User, userId, (doc, s) =>
        doc ? { doc, secret: { ...s, TOTPPending: box } } : null,
      );
      const uri = totp.toString();
      const qr = await QRCode.toDataURL(uri, { margin: 1, width: 240 });
      reply.header('Cache-Control', 'no-store');
      return reply
        .code(200)
        .type('application/json')
        .send(JSON.stringify({ Secret: secret.base32, URI: uri, QRCode: qr }));
    });

    app.post('/auth/enroll/totp/confirm', { schema: TOTP_CONFIRM }, async (req, reply) => {
      const change = await credentialChange(req, ctx, 'totp', 'set');
      const { userId } = change;
      const code = jsonBody(req).Code;
      if (typeof code !== 'string')
        throw new ApiError('InvalidField', 'Code must be a string', { field: 'Code' });
      const pending = (await ctx.store.getSecret(User, userId)).TOTPPending;
      if (typeof pending !== 'string')
        throw new ApiError('Conflict', 'no TOTP enrollment is in progress: POST /auth/enroll/totp first');
      // Counted apart from sign-in codes: a confirmation checks the pending secret, not the enrolled one.
      const at = {
        userId,
        secret: await ctx.store.getSecret(User, userId),
        deviceId: req.principal?.deviceId,
      };
      await regulated(req, ctx, at, 'totp_confirm', 'TOTP code', () =>
        checkCode(ctx, userId, code.replace(/\s+/g, ''), true),
      );
      await credentialChanged(req, reply, ctx, change, 'totp');
      return reply.code(204).send();
    });

    app.delete('/auth/enroll/totp', { schema: TOTP_REMOVE }, async (req, reply) => {
      const change = await credentialChange(req, ctx, 'totp', 'remove');
      const { userId } = change;
      await ctx.store.systemPut(User, userId, (doc, s) => {
        if (!doc) return null;
        const { TOTPSecret: _a, TOTPPending: _b, TOTPLastStep: _c, ...rest } = s;
        return { doc: { ...doc, HaveTOTPSecret: false }, secret: rest };
      });
      await credentialChanged(req, reply, ctx, change, 'totp');
      return reply.code(204).send();
    });
  },
};

const TAG = 'Sign-in: authenticator app';
const TOTP_STEP = signInStep(
  TAG,
  'Prove a code of the authenticator app (each code once)',
  { code: { type: 'string', maxLength: 16 } },
  ['code'],
);
const TOTP_GENERATE = enrollment(TAG, 'A new pending secret to scan; enrolled once confirmed', {
  answer: jsonObject('The pending secret', {
    Secret: { type: 'string' },
    URI: { type: 'string' },
    QRCode: { type: 'string', description: 'A data: URL of the QR code' },
  }),
});
const TOTP_CONFIRM = enrollment(TAG, 'Confirm the pending secret with a code from the app', {
  body: formBody({ code: { type: 'string' } }, ['code']),
});
const TOTP_REMOVE = enrollment(TAG, 'Remove the authenticator app');
