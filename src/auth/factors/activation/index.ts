import { verify } from '@node-rs/argon2';
import { sql } from 'kysely';
import type { ServiceContext } from '../../../api/context.js';
import { ApiError } from '../../../api/errors.js';
import { ActivationCode } from '../../../objects/activationcode.js';
import { type Doc, timestampMs } from '../../../objects/fields.js';
import { User } from '../../../objects/user.js';
import { tenantDoc } from '../../integrity.js';
import { type Factor, FLOW, field, formIntent, formOf, identified, proven, regulated } from '../factor.js';

/** At most this many candidate codes are tried per attempt (each is an argon2id verification). */
const MAX_CANDIDATES = 64;

const usable = (doc: Doc, userId: string, now: number) => {
  const owner = String(doc.UserID ?? '');
  if (owner !== '' && owner !== userId) return false;
  const exp = timestampMs(String(doc.ExpireTime));
  if (Number.isFinite(exp) && now >= exp) return false;
  const max = Number(doc.MaxUses ?? 1);
  return max === 0 || Number(doc.Uses ?? 0) < max;
};

/** Finds the code's object and spends one use of it; false when no usable code matches. */
async function redeem(ctx: ServiceContext, userId: string, code: string): Promise<boolean> {
  const rows = await sql<{ id: string; data: string; secret: string | null }>`
    SELECT id, data, secret FROM objects WHERE type = ${ActivationCode.kind} AND secret IS NOT NULL
    ORDER BY modify_time DESC LIMIT 1000`.execute(ctx.db.kysely);
  const now = Date.now();
  const candidates = rows.rows
    .map((r) => ({
      id: r.id,
      doc: JSON.parse(r.data) as Doc,
      hash: (JSON.parse(r.secret ?? '{}') as Doc).CodeHash,
    }))
    .filter((c) => typeof c.hash === 'string' && usable(c.doc, userId, now))
    // Codes reserved for this user first.
    .sort((a, b) => Number(b.doc.UserID === userId) - Number(a.doc.UserID === userId))
    .slice(0, MAX_CANDIDATES);
  const results = await Promise.all(candidates.map((c) => verify(String(c.hash), code).catch(() => false)));
  const hit = candidates[results.indexOf(true)];
  if (!hit) return false;
  let spent = false;
  await ctx.store.systemPut(ActivationCode, hit.id, (doc, secret) => {
    if (!doc) return null;
    spent = usable(doc, userId, Date.now());
    return spent ? { doc: { ...doc, Uses: Number(doc.Uses ?? 0) + 1 }, secret } : { doc, secret };
  });
  return spent;
}

/**
 * POST /auth/activation_code (form intent, code): a valid ActivationCode (not expired, uses left,
 * for this user or anyone) counts as a one-time possession factor and unlocks /auth/activate.
 * POST /auth/activate: marks the session's user Active; 403 when the tenant requires an
 * activation code and this session has not presented one.
 */
export const activationFactor: Factor = {
  name: 'activation_code',
  kind: 'possession',
  register(app, ctx) {
    app.post('/auth/activation_code', FLOW, async (req, reply) => {
      const form = formOf(req);
      const code = field(form, 'code', { required: true, max: 256 }).trim();
      const who = await identified(req, reply, ctx, form);
      await formIntent(ctx, form, who.session);
      await regulated(req, ctx, who.user.id, 'activation code', () => redeem(ctx, who.user.id, code));
      await proven(req, reply, ctx, who.session, 'activation_code', { ActivationCode: true });
      return reply.code(204).send();
    });

    app.post('/auth/activate', FLOW, async (req, reply) => {
      const who = await identified(req, reply, ctx);
      const tenant = await tenantDoc(ctx);
      if (who.user.doc.Active !== true) {
        if (tenant.RequireActivationCode === true && who.session.data.ActivationCode !== true)
          throw new ApiError(
            'ActivationCodeRequired',
            'an activation code is required: POST /auth/activation_code first',
          );
        if (tenant.RequireActivationCode !== true && who.session.level < 2)
          throw new ApiError('Forbidden', 'prove a factor before activating the account');
        await ctx.store.systemPut(User, who.user.id, (doc, secret) =>
          doc ? { doc: { ...doc, Active: true }, secret } : null,
        );
      }
      return reply.code(204).send();
    });
  },
};
