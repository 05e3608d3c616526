import { APIKey } from '../objects/apikey.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import { alteredObject, type ObjectStore } from '../store/objects.js';
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
  /** The objects it was read from (alteredObject keys), set by the cache. */
  deps?: readonly string[];
}

/**
 * Validated API keys by hash, for at most a second. A write that updates or deletes an API key or
 * a user drops the keys that depend on it (the key itself, or the keys of that user): at once when
 * it was committed through this store, and when its notice arrives when another instance made it
 * (PostgreSQL NOTIFY, relayed as the store's 'remote' event; src/store/notifier.ts). A notice that
 * names kinds only (more objects than it names, or a resync) drops every key. So a deleted key, a
 * changed scope or a disabled user takes effect at once here and within a second anywhere, and the
 * users written all the time by a busy directory, on any instance, do not send every other key
 * back to the database.
 */
export class KeyCache {
  private readonly entries = new Map<string, CachedKey>();
  /** The cached hashes that depend on each object (alteredObject keys): their key and its user. */
  private readonly dependents = new Map<string, Set<string>>();
  /** Bumped on every alteration: what a lookup read is stored only if nothing it depends on moved since. */
  generation = 0;
  /** The generation at which each object was last altered, for the lookups in flight meanwhile. */
  private readonly alteredAt = new Map<string, number>();
  /** Lookups that began before this generation store nothing (all dropped, or alteredAt forgotten). */
  private floor = 0;

  constructor(store: ObjectStore) {
    // A new object cannot change a validation already made; an updated or deleted key or user can.
    store.onAltered([APIKey.kind, User.kind], (objects) => {
      this.generation++;
      if (!objects) {
        this.entries.clear();
        this.dependents.clear();
        this.floor = this.generation;
        return;
      }
      for (const o of objects) {
        this.alteredAt.set(o, this.generation);
        for (const hash of this.dependents.get(o) ?? []) this.drop(hash);
      }
      if (this.alteredAt.size > MAX_ENTRIES) {
        this.alteredAt.clear();
        this.floor = this.generation;
      }
    });
  }

  get(hash: string, now: number): CachedKey | undefined {
    const e = this.entries.get(hash);
    if (e && e.until > now) return e;
    if (e) this.drop(hash);
    return undefined;
  }

  /**
   * Stores a validation read while `generation` was `readAt`, unless its key or its user was
   * altered since (or everything was dropped).
   */
  set(hash: string, entry: Omit<CachedKey, 'until'>, now: number, readAt: number) {
    if (readAt < this.floor) return;
    const deps = [alteredObject(APIKey.kind, entry.keyId)];
    const userId = String(entry.keyDoc.UserID ?? '');
    if (userId !== '') deps.push(alteredObject(User.kind, userId));
    if (deps.some((d) => (this.alteredAt.get(d) ?? -1) > readAt)) return;
    if (this.entries.size >= MAX_ENTRIES) {
      this.entries.clear();
      this.dependents.clear();
    }
    this.drop(hash);
    this.entries.set(hash, { ...entry, until: now + KEY_CACHE_TTL_MS, deps });
    for (const d of deps) {
      const set = this.dependents.get(d);
      if (set) set.add(hash);
      else this.dependents.set(d, new Set([hash]));
    }
  }

  /** Entries cached now (for tests). */
  get size() {
    return this.entries.size;
  }

  private drop(hash: string) {
    const e = this.entries.get(hash);
    if (!e) return;
    this.entries.delete(hash);
    for (const d of e.deps ?? []) {
      const set = this.dependents.get(d);
      set?.delete(hash);
      if (set?.size === 0) this.dependents.delete(d);
    }
  }
}

/** The service's cache of validated keys (one per service: src/store/service.ts). */
const KEY_CACHE = perService<KeyCache, KeyCacheOwner>('API key cache', (ctx) => new KeyCache(ctx.store));

type KeyCacheOwner = Pick<ServiceContext, 'store' | 'state'>;

export const keyCacheOf = (ctx: KeyCacheOwner): KeyCache => stateOf(ctx, KEY_CACHE);
