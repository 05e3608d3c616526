import { APIKey } from '../objects/apikey.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import type { ObjectStore } from '../store/objects.js';
import { perService, type ServiceContext, stateOf } from '../store/service.js';

/** The longest a validated key is trusted without a look at the database. */
export const KEY_CACHE_TTL_MS = 1000;
const MAX_ENTRIES = 10_000;

export interface CachedKey {
  keyId: string;
  keyDoc: Doc;
  /** The key's user, when it has one; re-checked (disabled, suspension window) on every hit. */
  userDoc: Doc | undefined;
  until: number;
}

/**
 * Validated API keys by hash, for at most a second. Cleared whole by every write committed through
 * this store that updates or deletes an API key or a user, and by every change another instance announces (PostgreSQL NOTIFY, relayed as the
 * store's 'remote' event while the event stream listens), so a deleted key, a changed scope or a
 * disabled user takes effect at once here and within a second anywhere.
 */
export class KeyCache {
  private readonly entries = new Map<string, CachedKey>();
  /** Bumped on every clear: a lookup that started before a clear must not store what it read. */
  generation = 0;

  constructor(store: ObjectStore) {
    // A new object cannot change a validation already made; an updated or deleted key or user can.
    store.onAltered([APIKey.kind, User.kind], () => {
      this.entries.clear();
      this.generation++;
    });
  }

  get(hash: string, now: number): CachedKey | undefined {
    const e = this.entries.get(hash);
    if (e && e.until > now) return e;
    if (e) this.entries.delete(hash);
    return undefined;
  }

  /** Stores a validation read while `generation` was `readAt`, unless a clear came in between. */
  set(hash: string, entry: Omit<CachedKey, 'until'>, now: number, readAt: number) {
    if (readAt !== this.generation) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(hash, { ...entry, until: now + KEY_CACHE_TTL_MS });
  }
}

/** The service's cache of validated keys (one per service: src/store/service.ts). */
const KEY_CACHE = perService<KeyCache, KeyCacheOwner>('API key cache', (ctx) => new KeyCache(ctx.store));

type KeyCacheOwner = Pick<ServiceContext, 'store' | 'state'>;

export const keyCacheOf = (ctx: KeyCacheOwner): KeyCache => stateOf(ctx, KEY_CACHE);
