import type { Account, KoaContextWithOIDC } from 'oidc-provider';
import { userUsable } from '../auth/apikeys.js';
import { FACTOR_KINDS, Level } from '../auth/integrity.js';
import { iterateObjects } from '../groups/report.js';
import { Membership } from '../objects/membership.js';
import { User } from '../objects/user.js';
import { appIdServesUser } from '../policy/apps.js';
import { membershipCounts } from '../policy/memberships.js';
import type { ServiceContext } from '../store/service.js';

/** The session's integrity level (src/auth/integrity.ts) as an acr value, and back. */
export const ACR_PREFIX = 'urn:gatehouse:level:';
export const ACR_VALUES = [1, 2, 3, 4].map((n) => `${ACR_PREFIX}${n}`);
export const acrOf = (level: number) => `${ACR_PREFIX}${Math.max(1, Math.min(4, level))}`;
export function levelOfAcr(acr: unknown): number | undefined {
  if (typeof acr !== 'string' || !acr.startsWith(ACR_PREFIX)) return undefined;
  const n = Number(acr.slice(ACR_PREFIX.length));
  return Number.isInteger(n) && n >= 1 && n <= 4 ? n : undefined;
}

/** RFC 8176 method names of the factors a session proved; mfa when two kinds were proven. */
const AMR: Record<string, string> = { password: 'pwd', pin: 'pin', totp: 'otp', backup: 'otp' };
export function amrOf(factors: readonly string[], level: number): string[] {
  const out = new Set<string>();
  for (const f of factors) {
    const m = AMR[f];
    if (m) out.add(m);
    if (FACTOR_KINDS[f] === 'hardware') out.add('hwk');
  }
  if (level >= Level.TwoFactors) out.add('mfa');
  return [...out];
}

/** Group IDs whose membership counts for the user at this level (as an access check counts them). */
export async function groupsOf(ctx: ServiceContext, userId: string, level: number): Promise<string[]> {
  const out: string[] = [];
  const memberships = iterateObjects(ctx, Membership, {
    filter: [`UserID = ${JSON.stringify(userId)}`, 'State = "active"'],
  });
  for await (const m of memberships) {
    const g = String(m.GroupID ?? '');
    if (await membershipCounts(ctx, g, userId, { level })) out.push(g);
    if (out.length >= 256) break;
  }
  return out.sort();
}

/**
 * The level the claims are for: the sign-in's (the acr of the code, refresh token or session
 * being used), else what the access token carries (extraTokenClaims in provider.ts).
 */
function levelInContext(ctx: KoaContextWithOIDC, token: unknown): number {
  const e = ctx.oidc?.entities as
    | Record<string, { acr?: string; extra?: Record<string, unknown> }>
    | undefined;
  const t = token as { acr?: string; extra?: Record<string, unknown> } | undefined;
  for (const acr of [
    t?.acr,
    t?.extra?.acr,
    e?.AuthorizationCode?.acr,
    e?.RefreshToken?.acr,
    ctx.oidc?.session?.acr,
  ]) {
    const l = levelOfAcr(acr);
    if (l !== undefined) return l;
  }
  return Level.OneFactor;
}

/**
 * oidc-provider's findAccount: a usable Gatehouse user (not disabled, not suspended). Claims:
 * sub (the user ID), email, name and its parts (scope profile), groups (scope groups: IDs of the
 * groups whose membership counts at the sign-in's level).
 */
export function findAccountFor(ctx: ServiceContext) {
  return async (kctx: KoaContextWithOIDC, id: string, token?: unknown): Promise<Account | undefined> => {
    const user = await ctx.store.get(User, id);
    if (!user || !userUsable(user.doc)) return undefined;
    const level = levelInContext(kctx, token);
    // App isolation: the client's App must still serve the user, at every code exchange, refresh
    // and userinfo call (a user removed from its AccessGroups after consent gets nothing more).
    // Undefined here makes the token endpoint answer invalid_grant and userinfo invalid_token.
    const clientId = kctx.oidc?.client?.clientId;
    if (clientId !== undefined) {
      const d = await appIdServesUser(ctx, clientId, id, { level, locationChecked: true });
      if (!d.Allowed) {
        ctx.logger.info({ client: clientId, rule: d.Rule }, `oidc: no account for the client: ${d.Reason}`);
        return undefined;
      }
    }
    return {
      accountId: id,
      async claims(_use, scope) {
        const scopes = new Set(String(scope ?? '').split(' '));
        const name = (user.doc.Name ?? {}) as Record<string, unknown>;
        const claims: Record<string, unknown> = { sub: id };
        if (scopes.has('email') && user.doc.Email) claims.email = user.doc.Email;
        if (scopes.has('profile')) {
          if (name.FullName) claims.name = name.FullName;
          if (name.GivenName) claims.given_name = name.GivenName;
          if (name.FamilyName) claims.family_name = name.FamilyName;
          if (user.doc.UserName) claims.preferred_username = user.doc.UserName;
        }
        if (scopes.has('groups')) claims.groups = await groupsOf(ctx, id, level);
        return claims as { sub: string };
      },
    };
  };
}
