import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { authenticateApiKey } from '../../src/auth/apikeys.js';
import { KEY_CACHE_TTL_MS } from '../../src/auth/keycache.js';
import { APIKey } from '../../src/objects/apikey.js';
import { User } from '../../src/objects/user.js';
import type { ObjectStore } from '../../src/store/objects.js';
import { backends, twoStores } from '../helpers.js';

describe.each(backends())('validated API keys are cached briefly on %s', (backend) => {
  let a: ObjectStore;
  let b: ObjectStore;
  /** Instance a's service object: the cache is the service's (src/auth/keycache.ts). */
  let serviceA: { store: ObjectStore };
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    // Two instances on one database.
    ({ a, b, close: cleanup } = await twoStores(backend));
    serviceA = { store: a };
  });
  afterAll(async () => cleanup?.());

  const newKey = async (store: ObjectStore, body: Record<string, unknown>) => {
    const { obj, response } = await store.create(APIKey, body);
    return { id: obj.id, etag: obj.etag, secret: String(response?.Secret) };
  };

  it('drops a key deleted through the same instance at once', async () => {
    const k = await newKey(a, { Scopes: ['audit'] });
    await authenticateApiKey(serviceA, k.secret); // now cached
    await a.delete(APIKey, k.id, k.etag);
    await expect(authenticateApiKey(serviceA, k.secret)).rejects.toMatchObject({ status: 401 });
  });

  it('drops a key deleted by another instance when told, and within the TTL in any case', async () => {
    const k = await newKey(a, { Scopes: ['audit'] });
    await authenticateApiKey(serviceA, k.secret);
    await b.delete(APIKey, k.id, k.etag);
    // Instance a has not been told: the validation it holds lives at most KEY_CACHE_TTL_MS.
    const later = Date.now() + KEY_CACHE_TTL_MS + 1;
    vi.spyOn(Date, 'now').mockReturnValue(later);
    try {
      await expect(authenticateApiKey(serviceA, k.secret)).rejects.toMatchObject({ status: 401 });
    } finally {
      vi.restoreAllMocks();
    }
    const k2 = await newKey(a, { Scopes: ['audit'] });
    await authenticateApiKey(serviceA, k2.secret);
    await b.delete(APIKey, k2.id, k2.etag);
    a.commits.emit('remote'); // what the PostgreSQL LISTEN relay does
    await expect(authenticateApiKey(serviceA, k2.secret)).rejects.toMatchObject({ status: 401 });
  });

  it('checks expiry and suspension times on every request, cached or not', async () => {
    const soon = new Date(Date.now() + 60_000).toISOString();
    const { obj: user } = await a.create(User, { Email: `s-${backend}@example.com`, SuspendAfter: soon });
    const k = await newKey(a, { Scopes: ['user'], UserID: user.id });
    expect((await authenticateApiKey(serviceA, k.secret)).userId).toBe(user.id);
    const expiring = await newKey(a, { Scopes: ['user'], ExpireTime: soon });
    await authenticateApiKey(serviceA, expiring.secret);
    // Within the cache's lifetime, but past both times: refused without a database read.
    const after = Date.now() + 61_000;
    vi.spyOn(Date, 'now').mockReturnValue(after);
    try {
      await expect(authenticateApiKey(serviceA, k.secret)).rejects.toMatchObject({ status: 401 });
      await expect(authenticateApiKey(serviceA, expiring.secret)).rejects.toMatchObject({ status: 401 });
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('keeps validations across creations, and drops them when a key or user is updated or deleted', async () => {
    const { obj: user } = await a.create(User, { Email: `c-${backend}@example.com` });
    const k = await newKey(a, { Scopes: ['user'], UserID: user.id });
    const lookups = vi.spyOn(a, 'findByKeyWithRef');
    try {
      await authenticateApiKey(serviceA, k.secret);
      await a.create(User, {});
      await a.create(APIKey, { Scopes: ['audit'] });
      await authenticateApiKey(serviceA, k.secret);
      expect(lookups).toHaveBeenCalledTimes(1);
      await a.update(User, user.id, { Email: `c-${backend}@example.com`, Disabled: true }, user.etag);
      await expect(authenticateApiKey(serviceA, k.secret)).rejects.toMatchObject({ status: 401 });
      expect(lookups).toHaveBeenCalledTimes(2);
    } finally {
      lookups.mockRestore();
    }
  });

  it('does not keep what a lookup read before a concurrent write committed', async () => {
    const k = await newKey(a, { Scopes: ['audit'] });
    const inFlight = authenticateApiKey(serviceA, k.secret);
    await a.delete(APIKey, k.id, k.etag);
    await inFlight.catch(() => undefined);
    await expect(authenticateApiKey(serviceA, k.secret)).rejects.toMatchObject({ status: 401 });
  });
});
