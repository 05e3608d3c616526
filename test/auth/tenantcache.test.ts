import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { tenantDoc } from '../../src/auth/integrity.js';
import { TENANT_CACHE_TTL_MS } from '../../src/auth/tenantcache.js';
import { TENANT_ID, Tenant } from '../../src/objects/tenant.js';
import { ObjectStore } from '../../src/store/objects.js';
import { backends, twoStores } from '../helpers.js';

/*
 * The Tenant's settings are read at several steps of every sign-in (src/auth/tenantcache.ts).
 * Cached, they must still apply at once after a write through this instance, at once after
 * another instance's announced write, and within the cache's life after any other write.
 */
describe.each(backends())('the Tenant cache on %s', (backend) => {
  let a: ObjectStore;
  let b: ObjectStore;
  let serviceA: { store: ObjectStore };
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ a, b, close: cleanup } = await twoStores(backend));
    serviceA = { store: a };
    await a.create(Tenant, { Name: 'first' }, TENANT_ID);
  });
  afterAll(async () => cleanup?.());

  const rename = (store: ObjectStore, Name: string) =>
    store.systemPut(Tenant, TENANT_ID, (doc) => ({ doc: { ...doc, Name } }));

  it('reads the database once while nothing changes', async () => {
    await rename(a, 'cached');
    const get = vi.spyOn(a, 'get');
    try {
      for (let i = 0; i < 5; i++) expect((await tenantDoc(serviceA)).Name).toBe('cached');
      expect(get).toHaveBeenCalledTimes(1);
    } finally {
      get.mockRestore();
    }
  });

  it('applies a write through the same instance at once', async () => {
    expect((await tenantDoc(serviceA)).Name).toBe('cached');
    await rename(a, 'renamed here');
    expect((await tenantDoc(serviceA)).Name).toBe('renamed here');
  });

  it("applies another instance's write when told, and within the cache's life in any case", async () => {
    expect((await tenantDoc(serviceA)).Name).toBe('renamed here');
    await rename(b, 'renamed there');
    // Not told: the copy held lives at most TENANT_CACHE_TTL_MS.
    expect((await tenantDoc(serviceA)).Name).toBe('renamed here');
    const later = Date.now() + TENANT_CACHE_TTL_MS + 1;
    vi.spyOn(Date, 'now').mockReturnValue(later);
    try {
      expect((await tenantDoc(serviceA)).Name).toBe('renamed there');
    } finally {
      vi.restoreAllMocks();
    }
    await rename(b, 'told');
    a.commits.emit('remote', new Set([Tenant.kind]), new Set()); // what the PostgreSQL LISTEN relay does
    expect((await tenantDoc(serviceA)).Name).toBe('told');
    // A notice naming other kinds only keeps it; one that names none drops it.
    await rename(b, 'not told');
    a.commits.emit('remote', new Set(['User']), new Set());
    expect((await tenantDoc(serviceA)).Name).toBe('told');
    a.commits.emit('remote');
    expect((await tenantDoc(serviceA)).Name).toBe('not told');
  });

  it('does not keep a read that a write overtook', async () => {
    await rename(a, 'before');
    a.commits.emit('remote'); // empty the cache
    // The read starts, the write commits and drops the cache, then the read finishes.
    const get = vi.spyOn(a, 'get').mockImplementationOnce(async (type, id) => {
      const old = await ObjectStore.prototype.get.call(a, type, id);
      await rename(a, 'after');
      return old;
    });
    try {
      expect((await tenantDoc(serviceA)).Name).toBe('before');
      expect((await tenantDoc(serviceA)).Name).toBe('after');
    } finally {
      get.mockRestore();
    }
  });

  it('hands out a frozen document that no caller can change for the others', async () => {
    const doc = await tenantDoc(serviceA);
    expect(() => {
      (doc as Record<string, unknown>).Name = 'changed by a caller';
    }).toThrow(TypeError);
    expect((await tenantDoc(serviceA)).Name).toBe('after');
  });
});
