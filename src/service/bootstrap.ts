import { userUsable } from '../auth/apikeys.js';
import type { ServiceConfig } from '../config/index.js';
import { parseListen } from '../config/setting.js';
import { ApiError } from '../core/errors.js';
import { APIKey } from '../objects/apikey.js';
import { TENANT_ID, Tenant } from '../objects/tenant.js';
import { User } from '../objects/user.js';
import type { ObjectStore } from '../store/objects.js';

export const INITIAL_ADMIN_USERNAME = 'admin';

/**
 * Prepares an empty database: the Tenant and an initial administrator (with `email` when given:
 * bootstrap.email). Idempotent and safe when several processes start at once (only the one that
 * creates the Tenant goes on). Returns the admin user's ID when this call created it, else undefined.
 */
export async function bootstrap(store: ObjectStore, email = ''): Promise<string | undefined> {
  if (await store.get(Tenant, TENANT_ID)) return undefined;
  try {
    await store.create(Tenant, {}, TENANT_ID);
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) return undefined;
    throw e;
  }
  const { obj } = await store.create(User, {
    UserName: INITIAL_ADMIN_USERNAME,
    ...(email ? { Email: email } : {}),
    Name: { FullName: 'Administrator' },
    Active: true,
    Admin: true,
  });
  return obj.id;
}

/** Creates an API key and returns its plaintext, the only time it exists. */
export async function createApiKey(
  store: ObjectStore,
  scopes: string[],
  userId: string,
  name: string,
): Promise<string> {
  const { response } = await store.create(APIKey, { Name: name, Scopes: scopes, UserID: userId });
  return String(response?.Secret);
}

/**
 * Where a one-time sign-in URL points: the sign-in pages' public URL from the configuration
 * (Tenant.SigninURL, server.signinurl, server.publicurl + /signin), else `listening`, the address
 * the service listens on. Never from a request.
 */
export function signinBaseFor(config: ServiceConfig, tenantSigninUrl: string, listening: string): string {
  const configured = tenantSigninUrl || config.server.signinurl;
  if (configured) return configured.replace(/\/+$/, '');
  if (config.server.publicurl) return `${config.server.publicurl.replace(/\/+$/, '')}/signin`;
  return `${listening.replace(/\/+$/, '')}/signin`;
}

/** http(s)://<server.listen>, with a loopback name for an all-interfaces address (0.0.0.0, ::). */
export function listenUrl(config: ServiceConfig): string {
  const { host, port } = parseListen(config.server.listen);
  const name = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return `${config.server.cert ? 'https' : 'http'}://${name}:${port}`;
}

export const setupLinkUrl = (base: string, token: string) => `${base}/setup?code=${token}`;

/** The first start's or `gatehouse recover`'s lines about a one-time sign-in URL. */
export function setupLinkLines(email: string, url: string, ttlSeconds: number): string[] {
  const until = new Date(Date.now() + ttlSeconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  return [
    `One-time sign-in URL for ${email}: open it to choose the password and sign in.`,
    `It works once and until ${until} (${Math.round(ttlSeconds / 60)} minutes):`,
    `  ${url}`,
  ];
}

/** An active administrator (Admin, Active, usable) with this e-mail address, or an Error saying why not. */
export async function activeAdminByEmail(store: ObjectStore, email: string) {
  const found = await store.findByKey(User, 'Email', email.trim().toLowerCase());
  const admin = found && found.doc.Admin === true && found.doc.Active === true && userUsable(found.doc);
  if (!found || !admin)
    throw new Error(`no active administrator has the e-mail address ${email}; no URL was made`);
  return found;
}
