import { ApiError } from '../core/errors.js';
import { APIKey } from '../objects/apikey.js';
import { TENANT_ID, Tenant } from '../objects/tenant.js';
import { User } from '../objects/user.js';
import type { ObjectStore } from '../store/objects.js';

export const INITIAL_ADMIN_USERNAME = 'admin';

/**
 * Prepares an empty database: the Tenant and an initial administrator. Idempotent and safe when
 * several processes start at once (only the one that creates the Tenant goes on). Returns the
 * admin user's ID when this call created it, else undefined.
 */
export async function bootstrap(store: ObjectStore): Promise<string | undefined> {
  if (await store.get(Tenant, TENANT_ID)) return undefined;
  try {
    await store.create(Tenant, {}, TENANT_ID);
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) return undefined;
    throw e;
  }
  const { obj } = await store.create(User, {
    UserName: INITIAL_ADMIN_USERNAME,
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
