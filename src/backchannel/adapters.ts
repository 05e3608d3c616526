import { userUsable } from '../auth/apikeys.js';
import { requiredLevel, tenantDoc } from '../auth/integrity.js';
import { requestSession, type Session, sessionById } from '../auth/session/sessions.js';
import { checkMembership, markUsed, signinBase } from '../groups/check.js';
import { User } from '../objects/user.js';
import type { ServiceContext } from '../store/service.js';
import type { MembershipsPort, ProxySession, SessionsPort } from './ports.js';

/**
 * A service session counts as signed in for the proxy when it names a usable user and has at
 * least the integrity level the tenant requires to read (Tenant.IntegrityRead, default one factor).
 */
async function signedIn(ctx: ServiceContext, s: Session | undefined): Promise<ProxySession | undefined> {
  if (!s || s.userId === '' || s.expireTime <= Date.now()) return undefined;
  if (s.level < requiredLevel(await tenantDoc(ctx), 'read')) return undefined;
  const user = await ctx.store.get(User, s.userId);
  if (!user || !userUsable(user.doc)) return undefined;
  return {
    sessionId: s.id,
    userId: s.userId,
    integrityLevel: s.level,
    expires: new Date(s.expireTime),
    ...(s.data.Location ? { location: s.data.Location } : {}),
  };
}

/** The sign-in issue's sessions (src/auth/session). */
export const sessionsAdapter: SessionsPort = {
  async current(req, ctx) {
    return signedIn(ctx, (await requestSession(req, ctx)).session);
  },
  async byId(ctx, id) {
    return signedIn(ctx, await sessionById(ctx, id));
  },
  async signinPage(ctx, next) {
    const base = await signinBase(ctx);
    return `${base}${base.includes('?') ? '&' : '?'}return=${encodeURIComponent(next)}`;
  },
};

/** The groups issue's membership check and its "use" operation (src/groups). */
export const membershipsAdapter: MembershipsPort = {
  async check(ctx, userId, groups, op, opts) {
    const r = await checkMembership(ctx, userId, groups, op, opts);
    return {
      Satisfied: r.StatusCode === 200,
      ...(r.Location ? { Location: r.Location } : {}),
      Results: r.Results,
    };
  },
  // The groups code records the use as the service itself, rate-limited, and leaves a membership
  // that stopped being active between the check and the write alone.
  markUsed,
};
