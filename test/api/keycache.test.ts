import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { authenticateApiKey } from '../../src/auth/apikeys.js';
import { KEY_CACHE_TTL_MS, keyCacheOf } from '../../src/auth/keycache.js';
import { APIKey, hashApiKey } from '../../src/objects/apikey.js';
import { User } from '../../src/objects/user.js';
import { alteredObject, type ObjectStore } from '../../src/store/objects.js';
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

  it("keeps other keys' validations when a key or a user is updated, and drops that one's", async () => {
    const { obj: u1 } = await a.create(User, { Email: `o1-${backend}@example.com` });
    const { obj: u2 } = await a.create(User, { Email: `o2-${backend}@example.com` });
    const k1 = await newKey(a, { Scopes: ['user'], UserID: u1.id });
    const k2 = await newKey(a, { Scopes: ['user'], UserID: u2.id });
    const other = await newKey(a, { Scopes: ['audit'] });
    for (const k of [k1, k2, other]) await authenticateApiKey(serviceA, k.secret);
    const cache = keyCacheOf(serviceA);
    const cached = (k: { secret: string }) => cache.get(hashApiKey(k.secret), Date.now()) !== undefined;
    await a.update(User, u1.id, { Email: `o1-${backend}@example.com`, Disabled: true }, u1.etag);
    expect([cached(k1), cached(k2), cached(other)]).toEqual([false, true, true]);
    await expect(authenticateApiKey(serviceA, k1.secret)).rejects.toMatchObject({ status: 401 });
    await a.update(APIKey, other.id, { Scopes: ['user'] }, other.etag);
    expect([cached(k2), cached(other)]).toEqual([true, false]);
    expect((await authenticateApiKey(serviceA, other.secret)).scopes).toEqual(new Set(['user']));
    // Another instance's notice that names the objects drops only what depends on them...
    await authenticateApiKey(serviceA, other.secret);
    a.commits.emit('remote', new Set([User.kind]), new Set(), new Set([alteredObject(User.kind, u2.id)]));
    expect([cached(k2), cached(other)]).toEqual([false, true]);
    await authenticateApiKey(serviceA, k2.secret);
    // ...and one that names kinds only (too many objects to name) drops everything of them.
    a.commits.emit('remote', new Set([User.kind]), new Set());
    expect([cached(k2), cached(other)]).toEqual([false, false]);
  });

  it("does not keep what a lookup read before its user's update committed", async () => {
    const { obj: user } = await a.create(User, { Email: `r-${backend}@example.com` });
    const k = await newKey(a, { Scopes: ['user'], UserID: user.id });
    const cache = keyCacheOf(serviceA);
    // A lookup that began before the update stores nothing it read; one about someone else does.
    const readAt = cache.generation;
    const { obj: other } = await a.create(User, { Email: `r2-${backend}@example.com` });
    await a.update(User, other.id, { Email: `r2-${backend}@example.com`, Disabled: true }, other.etag);
    const entry = { keyId: k.id, keyDoc: { UserID: user.id, Scopes: ['user'] }, userDoc: user.doc };
    cache.set('unrelated-write', entry, Date.now(), readAt);
    expect(cache.get('unrelated-write', Date.now())).toBeDefined();
    await a.update(User, user.id, { Email: `r-${backend}@example.com`, Disabled: true }, user.etag);
    cache.set('stale', entry, Date.now(), readAt);
    expect(cache.get('stale', Date.now())).toBeUndefined();
    // The same race through authenticateApiKey, with the write really concurrent.
    const { obj: u3 } = await a.create(User, { Email: `r3-${backend}@example.com` });
    const k3 = await newKey(a, { Scopes: ['user'], UserID: u3.id });
    const inFlight = authenticateApiKey(serviceA, k3.secret);
    await a.update(User, u3.id, { Email: `r3-${backend}@example.com`, Disabled: true }, u3.etag);
    await inFlight.catch(() => undefined);
    await expect(authenticateApiKey(serviceA, k3.secret)).rejects.toMatchObject({ status: 401 });
  });

  it('answers as an uncached check would, whatever writes and lookups interleave (property)', async () => {
    // Three users with two keys each; steps run a lookup beside a write, then compare every key's
    // answer with what the database says now.
    const users = await Promise.all(
      [0, 1, 2].map(async (i) => (await a.create(User, { Email: `p${i}-${backend}@example.com` })).obj),
    );
    const state = users.map((u, i) => ({ id: u.id, etag: u.etag, email: `p${i}-${backend}@example.com` }));
    const keys: { id: string; etag: string; secret: string; gone: boolean }[] = [];
    for (const u of users)
      for (let j = 0; j < 2; j++)
        keys.push({ ...(await newKey(a, { Scopes: ['user'], UserID: u.id })), gone: false });
    const truth = async (k: (typeof keys)[number]) => {
      const key = await a.get(APIKey, k.id);
      if (!key) return 'refused';
      const user = await a.get(User, String(key.doc.UserID));
      if (!user || user.doc.Disabled === true) return 'refused';
      return [...(key.doc.Scopes as string[])].sort().join(',');
    };
    const answer = async (k: (typeof keys)[number]) => {
      try {
        return [...(await authenticateApiKey(serviceA, k.secret)).scopes].sort().join(',');
      } catch (err) {
        expect(err).toMatchObject({ status: 401 });
        return 'refused';
      }
    };
    const step = fc.oneof(
      fc.record({ op: fc.constant('disable' as const), user: fc.nat(2), on: fc.boolean() }),
      fc.record({ op: fc.constant('scopes' as const), key: fc.nat(5), audit: fc.boolean() }),
      fc.record({ op: fc.constant('delete' as const), key: fc.nat(5) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(step, fc.nat(5)), { minLength: 1, maxLength: 8 }), async (steps) => {
        for (const [s, looked] of steps) {
          const write = async () => {
            if (s.op === 'disable') {
              const u = state[s.user] as (typeof state)[number];
              const { obj } = await a.update(User, u.id, { Email: u.email, Disabled: s.on }, u.etag);
              u.etag = obj.etag;
            } else {
              const k = keys[s.key] as (typeof keys)[number];
              if (k.gone) return;
              if (s.op === 'delete') {
                await a.delete(APIKey, k.id, k.etag);
                k.gone = true;
              } else {
                const current = await a.get(APIKey, k.id);
                const body = { UserID: current?.doc.UserID, Scopes: s.audit ? ['user', 'audit'] : ['user'] };
                k.etag = (await a.update(APIKey, k.id, body, k.etag)).obj.etag;
              }
            }
          };
          await Promise.all([answer(keys[looked] as (typeof keys)[number]), write()]);
          for (const k of keys) expect(await answer(k)).toBe(await truth(k));
        }
      }),
      { numRuns: 15 },
    );
  });
});
