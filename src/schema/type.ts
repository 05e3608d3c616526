import type { Doc, FieldMap } from './fields.js';

export type Op = 'list' | 'create' | 'get' | 'update' | 'delete';
export const ALL_OPS: readonly Op[] = ['list', 'create', 'get', 'update', 'delete'];
export const READ_OPS: readonly Op[] = ['list', 'get'];

/**
 * API key scopes (docs/api.md). `admin` may do everything; each type grants the others what they
 * may do with it (ObjectType.grants):
 *   user:  one's own user, own API keys and vouch requests, and the group directory;
 *   audit: read-only access to user and activity information;
 *   sync:  administrative changes to users and groups only.
 */
export const SCOPES = ['user', 'audit', 'sync', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** 'all': any object of the type; 'own': only objects whose ownerField is the caller's user. */
export type Access = 'all' | 'own';
export type Grants = Partial<Record<Op, Access>>;
export const READ: Grants = { list: 'all', get: 'all' };
export const FULL: Grants = { list: 'all', get: 'all', create: 'all', update: 'all', delete: 'all' };

/**
 * Who may set a privilege-bearing field (src/policy/grants.ts checks them):
 *   admin:        only the admin scope may set it to anything but its default on create, or change
 *                 it on update (so demoting an administrator is admin-only too).
 *   scopes held:  every scope listed must be one the caller holds (admin holds all); an empty
 *                 list means the default scopes of a new key.
 *   own user:     the caller's own user ID (empty: the caller) unless the caller is admin.
 */
export type FieldRule = 'admin' | 'scopes held' | 'own user';

/** Who is writing: hooks use it for defaults such as the owner of a new API key. */
export interface Actor {
  userId: string;
}

/** What a type's `prepare` hook sees and may change before a create or update is stored. */
export interface PrepareContext {
  /** The normalized object about to be stored; the hook may set read-only fields on it. */
  doc: Doc;
  /** The raw client body (for write-only fields such as a code to hash). */
  input: Doc;
  /** Hidden per-object state, never shown by the API (hashes); starts as the stored one. */
  secret: Doc;
  previous: Doc | undefined;
  isCreate: boolean;
  actor: Actor | undefined;
  /** Extra fields for the create response body (only APIKey has one). */
  response?: Doc;
}

export interface ObjectType {
  /** The type name, as used by Kind in the event stream: "User". */
  kind: string;
  /** The collection path segment: "users". */
  path: string;
  /** generated: POST /<type>; named: POST /<type>/:name; singleton: the one Tenant. */
  identity: 'generated' | 'named' | 'singleton';
  ops: readonly Op[];
  /** Client-visible fields, in the order they are serialized. ID is added by the registry. */
  fields: FieldMap;
  /** Top-level string fields that must be unique (case-insensitively) among non-empty values. */
  unique?: readonly string[];
  /** Fields a client may send but never reads back (they are hashed by `prepare`). */
  writeOnly?: FieldMap;
  /** Checks the name given in the path of a named type; returns an error message. */
  checkName?: (name: string) => string | undefined;
  /** Derives hidden state and read-only fields before a write. */
  prepare?: (ctx: PrepareContext) => void | Promise<void>;
  /** The field holding the owning user's ID, for scopes that may act on their own objects only. */
  ownerField?: string;
  /**
   * What each scope but admin may do with this type; anything not granted is refused with 403.
   * docs/api.md carries these as the permissions table, checked cell by cell against the API.
   */
  grants?: Partial<Record<Exclude<Scope, 'admin'>, Grants>>;
  /** Privilege-bearing fields and who may set them; docs/api.md's field-rules table. */
  fieldRules?: Record<string, FieldRule>;
  /** Extra lookup keys (name → value) indexed for this object, derived from hidden state. */
  lookupKeys?: (doc: Doc, secret: Doc) => Record<string, string>;
  /**
   * Other instances sharing the database keep caches derived from objects of this type
   * (validated API keys, enabled scripts): a write is answered only once they have been told of
   * it (src/store/notifier.ts, CommitNotifier). 'changes': of its updates and deletions; 'all':
   * of its creations too. Writes of other types are announced a few milliseconds later, together
   * with others, and answered without waiting for that.
   */
  cachedElsewhere?: 'changes' | 'all';
}

/** The fields a client's body may carry: the type's fields and its write-only ones. */
export const bodyFields = (type: ObjectType): FieldMap =>
  type.writeOnly ? { ...type.fields, ...type.writeOnly } : type.fields;
