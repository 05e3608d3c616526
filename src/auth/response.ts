import { User } from '../objects/user.js';
import type { ServiceContext } from '../store/service.js';
import { factorsOf } from './factors/index.js';
import { FACTOR_KINDS, LEVEL_NAMES, Level, levelOfKinds, locationCap, tenantDoc } from './integrity.js';
import type { Session } from './session/sessions.js';

/*
 * The shapes the sign-in flow answers with. The HTTP routes (src/api/auth.ts) and the event
 * stream (src/events/sessions.ts) both send them, so they live in the feature, not in a route file.
 */

/** AuthResponse: where the session stands, against an intent or the tenant's read level. */
export async function authResponse(
  ctx: ServiceContext,
  s: Session | undefined,
  need: number,
  intent?: { method: string; path: string },
) {
  const level = s?.level ?? 0;
  // A sign-in script may require more than the tenant does, with a reason for the person.
  need = Math.max(need, s?.data.ScriptLevel ?? 0);
  const user = s && s.userId !== '' ? await ctx.store.get(User, s.userId) : undefined;
  const secret = user ? await ctx.store.getSecret(User, user.id) : {};
  const usable = user
    ? factorsOf(ctx)
        .filter((f) => f.kind && f.enrolled?.(user.doc, secret))
        .map((f) => f.name)
    : [];
  const next = user ? usable.filter((n) => !s?.factors.includes(n)) : ['email'];
  // The best level this user's factors can reach (what the sign-in pages aim for).
  const byFactors = user ? levelOfKinds(usable.map((n) => FACTOR_KINDS[n])) : Level.Identified;
  // The location policy caps what the factors can reach until a location inside a region is reported.
  const cap = locationCap(await tenantDoc(ctx), s?.data.Location);
  const reachable = Math.min(byFactors, cap);
  return {
    Authorized: user !== undefined && level >= need,
    IntegrityLevel: level,
    IntegrityLevelName: LEVEL_NAMES[level],
    RequiredLevel: need,
    ReachableLevel: Math.max(reachable, level),
    LocationRequired: cap < Math.min(Level.Hardware, Math.max(byFactors, need)),
    SessionID: s?.id ?? '',
    UserID: s?.userId ?? '',
    Email: user ? String(user.doc.Email ?? '') : '',
    Active: user ? user.doc.Active === true : false,
    Proven: s?.factors ?? [],
    Factors: next,
    Expires: s ? new Date(s.expireTime).toISOString() : '',
    ...(intent ? { Method: intent.method, Path: intent.path } : {}),
    ...(s?.data.ScriptReason ? { Reason: s.data.ScriptReason } : {}),
  };
}

/** The OtherSession shape (GET /auth/sessions items, the event stream's OtherSession kind). */
export function otherSession(s: Session, current: string | undefined) {
  return {
    ID: s.id,
    Current: s.id === current,
    UserID: s.userId,
    IntegrityLevel: s.level,
    Factors: s.factors,
    CreateTime: new Date(s.createTime).toISOString(),
    LastSeen: new Date(s.lastSeen).toISOString(),
    ExpireTime: new Date(s.expireTime).toISOString(),
    UserAgent: s.data.UserAgent ?? '',
    Address: s.data.Address ?? '',
    ...(s.data.Location ? { Location: s.data.Location } : {}),
  };
}
