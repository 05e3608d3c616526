import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { InteractionResults, Provider } from 'oidc-provider';
import { userUsable } from '../auth/apikeys.js';
import { secretsKey } from '../auth/session/keys.js';
import type { Session } from '../auth/session/sessions.js';
import { User } from '../objects/user.js';
import { appIdServesUser } from '../policy/apps.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { acrOf, amrOf } from './account.js';

type Details = Awaited<ReturnType<Provider['interactionDetails']>>;

/**
 * What the interaction page must do next for this browser:
 * - signin: send the person to Gatehouse's sign-in pages (no session, another user's, or a level
 *   below what the client needs), to come back here;
 * - reauth: the client asked for a fresh sign-in (prompt=login, or max_age exceeded) and the
 *   session is older than this authorization request: the person confirms, the session ends,
 *   and they sign in again;
 * - login: finish the login step with the session's user, level (acr) and factors (amr);
 * - consent: show the consent page;
 * - mismatch: the session's user is not the one the provider session signed in;
 * - refused: the client's App does not serve the user (App isolation: src/policy/apps.ts), so
 *   the request ends with access_denied before any login or consent.
 */
export type Step =
  | { kind: 'signin'; need: number }
  | { kind: 'reauth' }
  | { kind: 'login'; result: InteractionResults }
  | { kind: 'consent'; user: Doc; scopes: string[] }
  | { kind: 'mismatch' }
  | { kind: 'refused'; reason: string };

export async function nextStep(
  ctx: ServiceContext,
  details: Details,
  s: Session | undefined,
  need: number,
  now = Date.now(),
): Promise<Step> {
  const user = s && s.userId !== '' ? await ctx.store.get(User, s.userId) : undefined;
  if (!s || !user || !userUsable(user.doc) || s.expireTime <= now || s.level < need)
    return { kind: 'signin', need };
  const served = await appIdServesUser(ctx, String(details.params.client_id ?? ''), s.userId, {
    level: s.level,
    ...(s.data.Location ? { location: s.data.Location } : {}),
  });
  if (!served.Allowed) return { kind: 'refused', reason: served.Reason };
  if (details.prompt.name === 'login') {
    // A session begun after this request started is a fresh sign-in by definition.
    const fresh = s.createTime >= details.iat * 1000;
    const maxAge = Number(details.params.max_age);
    const tooOld = Number.isFinite(maxAge) && now - s.createTime > maxAge * 1000;
    if (!fresh && (details.prompt.reasons.includes('login_prompt') || tooOld)) return { kind: 'reauth' };
    return {
      kind: 'login',
      result: {
        login: {
          accountId: s.userId,
          acr: acrOf(s.level),
          amr: amrOf(s.factors, s.level),
          ts: Math.floor(s.createTime / 1000),
          remember: false,
        },
      },
    };
  }
  if (details.prompt.name === 'consent') {
    if (details.session?.accountId !== s.userId) return { kind: 'mismatch' };
    const d = details.prompt.details as { missingOIDCScope?: string[] };
    const scopes = [
      ...new Set([...(d.missingOIDCScope ?? []), ...String(details.params.scope ?? '').split(' ')]),
    ]
      .filter((x) => x !== '')
      .sort((a, b) => (a === 'openid' ? -1 : b === 'openid' ? 1 : a.localeCompare(b)));
    return { kind: 'consent', user: user.doc, scopes };
  }
  return { kind: 'mismatch' };
}

/** Records the person's consent: the grant gains what the client asked for. */
export async function grantConsent(provider: Provider, details: Details): Promise<InteractionResults> {
  const accountId = details.session?.accountId ?? '';
  const clientId = String(details.params.client_id);
  const grant = details.grantId
    ? ((await provider.Grant.find(details.grantId)) ?? new provider.Grant({ accountId, clientId }))
    : new provider.Grant({ accountId, clientId });
  const d = details.prompt.details as {
    missingOIDCScope?: string[];
    missingOIDCClaims?: string[];
    missingResourceScopes?: Record<string, string[]>;
  };
  if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
  if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(d.missingResourceScopes ?? {}))
    grant.addResourceScope(indicator, scopes.join(' '));
  const grantId = await grant.save();
  return { consent: { grantId } };
}

/**
 * The consent form's anti-forgery token: an HMAC of the interaction and the Gatehouse session,
 * so a form can be submitted only by the browser it was shown to, for that request only.
 */
export async function formToken(ctx: ServiceContext, uid: string, sessionId: string): Promise<string> {
  const key = Buffer.from(
    hkdfSync('sha256', await secretsKey(ctx), Buffer.alloc(0), 'gatehouse oidc forms', 32),
  );
  return createHmac('sha256', key).update(`${uid}\n${sessionId}`).digest('base64url');
}

export async function checkFormToken(ctx: ServiceContext, uid: string, sessionId: string, given: unknown) {
  if (typeof given !== 'string') return false;
  const want = Buffer.from(await formToken(ctx, uid, sessionId));
  const got = Buffer.from(given);
  return got.length === want.length && timingSafeEqual(got, want);
}
