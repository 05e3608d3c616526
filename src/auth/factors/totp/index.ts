import * as OTPAuth from 'otpauth';
import QRCode from 'qrcode';
import { ApiError } from '../../../core/errors.js';
import { User } from '../../../objects/user.js';
import type { ServiceContext } from '../../../store/service.js';
import { tenantDoc } from '../../integrity.js';
import { type Factor, regulated } from '../factor.js';
import { decryptSecret, encryptSecret } from '../secrets.js';

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

/** A pending secret for the user to scan: stored until a code from the app confirms it. */
async function pendingSecret(ctx: ServiceContext, userId: string) {
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
  return { Secret: secret.base32, URI: uri, QRCode: qr };
}

const spaceless = (code: string) => code.replace(/\s+/g, '');

/**
 * POST /auth/totp (form code): a code from an authenticator app. Enrollment: POST
 * /auth/enroll/totp starts (secret, otpauth URI, QR code), POST /auth/enroll/totp/confirm {"Code"}
 * finishes, DELETE /auth/enroll/totp removes. The secret is kept AES-256-GCM encrypted.
 */
export const totpFactor: Factor = {
  name: 'totp',
  kind: 'possession',
  tag: 'Sign-in: authenticator app',
  enrolled: (user) => user.HaveTOTPSecret === true,
  words: { label: 'authenticator app', proof: 'your authenticator app' },
  form: { rank: 30, submit: 'Verify code', hint: 'Open your authenticator app and type the 6-digit code.' },
  settings: { title: 'Authenticator app', rank: 30, client: 'totp' },
  prove: {
    summary: 'Prove a code of the authenticator app (each code once)',
    what: 'TOTP code',
    fields: [
      {
        name: 'code',
        label: 'Code from your authenticator app',
        input: 'digits',
        maxLength: 16,
        autocomplete: 'one-time-code',
      },
    ],
    check: (ctx, who, values) => checkCode(ctx, who.user.id, spaceless(values.code ?? ''), false),
  },
  enroll: [
    {
      // An administrator may provision a user's authenticator (?user=): the secret goes to them.
      // Only a pending secret is stored here; the confirmation replaces the enrolled one.
      method: 'POST',
      op: 'set',
      summary: 'A new pending secret to scan; enrolled once confirmed',
      answer: {
        Secret: { type: 'string' },
        URI: { type: 'string' },
        QRCode: { type: 'string', description: 'A data: URL of the QR code' },
      },
      completes: false,
      write: (ctx, { userId }) => pendingSecret(ctx, userId),
    },
    {
      method: 'POST',
      path: '/confirm',
      op: 'set',
      summary: 'Confirm the pending secret with a code from the app',
      body: { properties: { Code: { type: 'string', maxLength: 16 } }, required: ['Code'] },
      async write(ctx, { userId }, body, req) {
        const pending = (await ctx.store.getSecret(User, userId)).TOTPPending;
        if (typeof pending !== 'string')
          throw new ApiError('Conflict', 'no TOTP enrollment is in progress: POST /auth/enroll/totp first');
        // Counted apart from sign-in codes: a confirmation checks the pending secret, not the enrolled one.
        const at = { userId, deviceId: req.principal?.deviceId };
        await regulated(req, ctx, at, 'totp_confirm', 'TOTP code', () =>
          checkCode(ctx, userId, spaceless(body.Code ?? ''), true),
        );
        return undefined;
      },
    },
    {
      method: 'DELETE',
      op: 'remove',
      summary: 'Remove the authenticator app',
      async write(ctx, { userId }) {
        await ctx.store.systemPut(User, userId, (doc, s) => {
          if (!doc) return null;
          const { TOTPSecret: _a, TOTPPending: _b, TOTPLastStep: _c, ...rest } = s;
          return { doc: { ...doc, HaveTOTPSecret: false }, secret: rest };
        });
        return undefined;
      },
    },
  ],
};
