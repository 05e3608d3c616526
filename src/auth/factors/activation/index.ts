import { sql } from 'kysely';
import { ApiError } from '../../../core/errors.js';
import { argon2Verify } from '../../../core/hashing.js';
import { ActivationCode } from '../../../objects/activationcode.js';
import { Membership, membershipId } from '../../../objects/membership.js';
import { User } from '../../../objects/user.js';
import { type Doc, timestampMs } from '../../../schema/fields.js';
import type { ServiceContext } from '../../../store/service.js';
import { Level, tenantDoc } from '../../integrity.js';
import { type Factor, FLOW, type Identified, identified } from '../factor.js';
import { signInStep } from '../stepschemas.js';
import { reachableLevel } from '../stepup.js';

/** At most this many candidate codes are tried per attempt (each is an argon2id verification). */
const MAX_CANDIDATES = 64;

/**
 * Who a code may be redeemed by. An activation code is an enrolment invitation, never another
 * person's factor: a code with a UserID serves that user only (an administrator's invitation to
 * enrol, or re-enrol, that user), and only while they are being enrolled (not yet active, or no
 * factor of their own); a code without one (a general invitation) serves only a brand-new user:
 * not active and without any factor, and when it names a GroupID, only a member of that group
 * (approved or active: a pending join request does not count).
 */
interface Redeemer {
  userId: string;
  active: boolean;
  hasFactors: boolean;
  /** Groups (among those codes name) the user is a member of. */
  groups: ReadonlySet<string>;
}

const MEMBER_STATES = new Set(['approved', 'active']);

const usable = (doc: Doc, who: Redeemer, now: number) => {
  const owner = String(doc.UserID ?? '');
  if (owner !== '' && owner !== who.userId) return false;
  if (owner === '' ? who.active || who.hasFactors : who.active && who.hasFactors) return false;
  const group = String(doc.GroupID ?? '');
  if (owner === '' && group !== '' && !who.groups.has(group)) return false;
  const exp = timestampMs(String(doc.ExpireTime));
  if (Number.isFinite(exp) && now >= exp) return false;
  const max = Number(doc.MaxUses ?? 1);
  return max === 0 || Number(doc.Uses ?? 0) < max;
};

/** Finds the code's object and spends one use of it; false when no usable code matches. */
async function redeem(ctx: ServiceContext, user: Omit<Redeemer, 'groups'>, code: string): Promise<boolean> {
  const userId = user.userId;
  const rows = await sql<{ id: string; data: string; secret: string | null }>`
    SELECT id, data, secret FROM objects WHERE type = ${ActivationCode.kind} AND secret IS NOT NULL
    ORDER BY modify_time DESC LIMIT 1000`.execute(ctx.db.kysely);
  const now = Date.now();
  const codes = rows.rows.map((r) => ({
    id: r.id,
    doc: JSON.parse(r.data) as Doc,
    hash: (JSON.parse(r.secret ?? '{}') as Doc).CodeHash,
  }));
  const who: Redeemer = {
    ...user,
    groups: await memberOf(
      ctx,
      userId,
      codes.map((c) => c.doc),
    ),
  };
  const candidates = codes
    .filter((c) => typeof c.hash === 'string' && usable(c.doc, who, now))
    // Codes reserved for this user first.
    .sort((a, b) => Number(b.doc.UserID === userId) - Number(a.doc.UserID === userId))
    .slice(0, MAX_CANDIDATES);
  const results = await Promise.all(
    candidates.map((c) => argon2Verify(String(c.hash), code).catch(() => false)),
  );
  const hit = candidates[results.indexOf(true)];
  if (!hit) return false;
  let spent = false;
  await ctx.store.systemPut(ActivationCode, hit.id, (doc, secret) => {
    if (!doc) return null;
    spent = usable(doc, who, Date.now());
    return spent ? { doc: { ...doc, Uses: Number(doc.Uses ?? 0) + 1 }, secret } : { doc, secret };
  });
  return spent;
}

/** The groups, among those the codes name, that the user is a member of (approved or active). */
async function memberOf(ctx: ServiceContext, userId: string, codes: Doc[]): Promise<Set<string>> {
  const named = new Set(codes.map((d) => String(d.GroupID ?? '')).filter((g) => g !== ''));
  const out = new Set<string>();
  for (const group of named) {
    const m = await ctx.store.get(Membership, membershipId(group, userId));
    if (m && MEMBER_STATES.has(String(m.doc.State))) out.add(group);
  }
  return out;
}

async function redeemer(ctx: ServiceContext, who: Identified): Promise<Omit<Redeemer, 'groups'>> {
  return {
    userId: who.user.id,
    active: who.user.doc.Active === true,
    hasFactors: (await reachableLevel(ctx, who.user.doc, who.secret)) > Level.Identified,
  };
}

/**
 * POST /auth/activation_code (form intent, code): a valid ActivationCode (not expired, uses left,
 * usable by this user: see `usable`) is recorded as an invitation (kind 'invitation': level 1
 * factor on its own, never a second factor nor an administrator's), unlocks /auth/activate, and
 * lets the session enrol the user's first factors (stepup.ts).
 * POST /auth/activate: marks the session's user Active; 403 when the tenant requires an
 * activation code and this session has not presented one.
 */
const TAG = 'Sign-in: activation';

export const activationFactor: Factor = {
  name: 'activation_code',
  kind: 'invitation',
  tag: TAG,
  words: { label: 'activation code', proof: 'your activation code' },
  // Not a choice (no user has it set up): the page shows it when the account needs one.
  form: { submit: 'Activate' },
  prove: {
    summary: 'Present an activation code (an invitation)',
    what: 'activation code',
    fields: [{ name: 'code', label: 'Activation code', input: 'text', maxLength: 256, autocomplete: 'off' }],
    check: async (ctx, who, values) => redeem(ctx, await redeemer(ctx, who), (values.code ?? '').trim()),
    sessionData: { ActivationCode: true },
  },
  register(app, ctx) {
    app.post('/auth/activate', { ...FLOW, schema: ACTIVATE }, async (req, reply) => {
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

const ACTIVATE = signInStep(
  TAG,
  'Activate the signing-in user’s account (after an activation code or a proven factor)',
  {},
  [],
);
