import { TENANT_ID, Tenant } from '../objects/tenant.js';
import type { Doc } from '../schema/fields.js';
import type { ObjectStore } from '../store/objects.js';
import { perService, type ServiceContext, stateOf } from '../store/service.js';

/** The longest the Tenant read from the database is trusted without a fresh look. */
export const TENANT_CACHE_TTL_MS = 1000;

/**
 * The Tenant's settings (integrity levels, password rules, session limits), which a sign-in reads
 * at several steps. Dropped by every write committed through this store that updates or deletes
 * the Tenant, and by every change another instance announces (PostgreSQL NOTIFY: the Tenant is
 * announced at once, `cachedElsewhere`), so a changed setting applies at once here and within a
 * second anywhere, as the API key cache's validations do.
 */
export class TenantCache {
  private value: { doc: Doc; until: number } | undefined;
  /** Bumped on every drop: a read that started before a drop must not store what it read. */
  private generation = 0;

  constructor(private readonly store: ObjectStore) {
    store.onAltered([Tenant.kind], () => {
      this.value = undefined;
      this.generation++;
    });
  }

  /** The Tenant's document, frozen: callers share it and must not change it. */
  async get(now = Date.now()): Promise<Doc> {
    const v = this.value;
    if (v && v.until > now) return v.doc;
    const readAt = this.generation;
    const doc = deepFreeze((await this.store.get(Tenant, TENANT_ID))?.doc ?? {});
    if (readAt === this.generation) this.value = { doc, until: now + TENANT_CACHE_TTL_MS };
    return doc;
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

const TENANT_CACHE = perService<TenantCache, TenantCacheOwner>(
  'Tenant cache',
  (ctx) => new TenantCache(ctx.store),
);

type TenantCacheOwner = Pick<ServiceContext, 'store' | 'state'>;

export const tenantCacheOf = (ctx: TenantCacheOwner): TenantCache => stateOf(ctx, TENANT_CACHE);
