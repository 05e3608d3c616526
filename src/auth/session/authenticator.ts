import type { FastifyRequest } from 'fastify';
import { ApiError, type ErrorBody } from '../../core/errors.js';
import { User } from '../../objects/user.js';
import type { ServiceContext } from '../../store/service.js';
import { userUsable } from '../apikeys.js';
import { deviceTag } from '../factors/devices.js';
import { classify, isSafeMethod, Level, provenLevel, requiredLevel, tenantDoc } from '../integrity.js';
import { signIntent } from '../intents.js';
import type { Principal } from '../principal.js';
import { requestSession } from './sessions.js';

/** Header that carries the signed intent on a 401; the body carries it too, as "Intent". */
export const INTENT_HEADER = 'X-Service-Intent';

/** A 401 that carries a signed intent (header and body) so the client can sign in and retry. */
export class IntentError extends ApiError {
  constructor(
    kind: 'Unauthenticated' | 'InsufficientIntegrity',
    message: string,
    readonly intent: string,
    readonly integrityLevel: number,
    readonly requiredLevel: number,
  ) {
    super(kind, message, {
      headers: { [INTENT_HEADER]: intent, 'WWW-Authenticate': 'Bearer realm="gatehouse"' },
    });
  }
  override body(requestId?: string): ErrorBody {
    return {
      ...super.body(requestId),
      Intent: this.intent,
      IntegrityLevel: this.integrityLevel,
      RequiredLevel: this.requiredLevel,
    } as ErrorBody;
  }
}

/**
 * The 401 Insufficient Integrity for a request whose session must step up to `need` (the sign-in
 * pages take its intent, prove more factors in the same session, then retry).
 */
export async function insufficientIntegrity(
  req: FastifyRequest,
  ctx: ServiceContext,
  need: number,
  message: string,
): Promise<IntentError> {
  const { session } = await requestSession(req, ctx);
  const intent = await intentFor(req, ctx, need);
  return new IntentError('InsufficientIntegrity', message, intent, session ? provenLevel(session) : 0, need);
}

/** A signed intent for this request at level `need`, bound to its session (or device). */
async function intentFor(req: FastifyRequest, ctx: ServiceContext, need: number): Promise<string> {
  const st = await requestSession(req, ctx);
  const s = st.session;
  return signIntent(ctx, {
    sid: s?.id ?? '',
    did: intentDevice(st.deviceId ?? s?.deviceId),
    uid: s?.userId ?? '',
    method: req.method,
    path: req.url,
    lvl: need,
  });
}

/**
 * An intent names the refused device by its tag, not its ID: intents travel in URLs (sign-in
 * links, logs, history), and the device ID is the cookie that regulation trusts (devices.ts).
 */
export const intentDevice = (deviceId: string | undefined) => (deviceId ? deviceTag(deviceId) : '');

/** A Host header value: a name or an address, and a port. */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/;

/**
 * The service's own origin as the browser sees it, in the form URL.origin and the Origin header
 * use (no default port: "Host: x:80" is http://x). Only ever compared with what the same browser
 * sends (Origin, a return URL), never used to build a link for someone else. '' for a Host that
 * is not one.
 */
export function ownOrigin(req: FastifyRequest): string {
  if (!HOST.test(req.host)) return '';
  try {
    return new URL(`${req.protocol}://${req.host}`).origin;
  } catch {
    return '';
  }
}

/**
 * CSRF defence for cookie-authenticated writes: a cross-site page can neither set a custom
 * header (that needs a CORS preflight, which this service never grants) nor forge Origin.
 */
export function checkCsrf(req: FastifyRequest): void {
  const xrw = req.headers['x-requested-with'];
  if (typeof xrw === 'string' && xrw.trim() !== '') return;
  const origin = req.headers.origin;
  if (typeof origin === 'string' && origin !== '' && origin === ownOrigin(req)) return;
  throw new ApiError(
    'CsrfCheckFailed',
    'requests that change state with a session cookie must send the header "X-Requested-With: gatehouse" or come from this origin',
  );
}

/** Authenticates by the session cookie: a principal for a signed-in session with enough integrity. */
export async function sessionAuthenticator(
  req: FastifyRequest,
  ctx: ServiceContext,
): Promise<Principal | undefined> {
  const st = await requestSession(req, ctx);
  const path = req.url.split('?')[0] ?? '';
  if (!isSafeMethod(req.method) && (st.session || st.stale || path.startsWith('/auth'))) checkCsrf(req);
  const mode = req.routeOptions.config?.auth ?? 'required';
  const enforce = mode === 'required' && req.routeOptions.url !== undefined;
  const s = st.session;
  const refuse = async (kind: 'Unauthenticated' | 'InsufficientIntegrity', message: string, need: number) =>
    new IntentError(kind, message, await intentFor(req, ctx, need), s?.level ?? 0, need);
  const tenant = await tenantDoc(ctx);
  const user = s && s.userId !== '' ? await ctx.store.get(User, s.userId) : undefined;
  if (!s || !user || !userUsable(user.doc)) {
    if (!enforce) return undefined;
    const need = requiredLevel(tenant, classify(req, false));
    const why = st.stale
      ? 'the session has ended; sign in again'
      : 'authentication required: sign in, or send an API key as "Authorization: Bearer <key>"';
    throw await refuse('Unauthenticated', why, need);
  }
  // An administrator's rights need a factor of their own: an activation code (an invitation)
  // alone makes the session a plain user's, whatever level IntegrityAdmin asks for.
  const admin = user.doc.Admin === true && provenLevel(s) >= Level.OneFactor;
  const principal = (scope: 'admin' | 'user'): Principal => ({
    via: 'session',
    userId: s.userId,
    scopes: new Set([scope]),
    sessionId: s.id,
    integrityLevel: s.level,
    deviceId: s.deviceId,
  });
  // A sign-in script may have asked for more than the tenant does (docs/scripts.md).
  const need = Math.max(requiredLevel(tenant, classify(req, admin)), s.data.ScriptLevel ?? 0);
  if (s.level >= need) return principal(admin ? 'admin' : 'user');
  if (enforce && req.routeOptions.config?.followSignIn === true)
    return { ...principal('user'), scopes: new Set() };
  if (enforce) {
    throw await refuse(
      'InsufficientIntegrity',
      `this operation needs integrity level ${need}; the session has ${s.level}: prove another factor`,
      need,
    );
  }
  // Optional routes see only what the level allows: an administrator below IntegrityAdmin acts
  // as a plain user; below the plain class level the request is anonymous.
  if (admin && s.level >= requiredLevel(tenant, classify(req, false))) return principal('user');
  return undefined;
}
