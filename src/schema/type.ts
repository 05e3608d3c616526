import type { Doc, FieldMap } from './fields.js';

export type Op = 'list' | 'create' | 'get' | 'update' | 'delete';
export const ALL_OPS: readonly Op[] = ['list', 'create', 'get', 'update', 'delete'];
export const READ_OPS: readonly Op[] = ['list', 'get'];

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
  /** Extra lookup keys (name → value) indexed for this object, derived from hidden state. */
  lookupKeys?: (doc: Doc, secret: Doc) => Record<string, string>;
}
