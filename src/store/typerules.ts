import type { Transaction } from 'kysely';
import { ApiError } from '../core/errors.js';
import { type Doc, normalize } from '../schema/fields.js';
import { type Actor, bodyFields, type ObjectType } from '../schema/type.js';
import type { Database } from './db.js';

/**
 * What a write takes from its type's declaration (src/schema/type.ts), for ObjectStore: the client
 * body normalized to the declared fields and handed to the type's prepare hook; reference fields
 * that must name existing objects; unique fields and lookup keys claimed in object_keys. Runs
 * inside the store's write transaction (`tx`).
 */

type Tx = Transaction<Database>;

// module-state: each type's reference fields, found once (a type's fields never change).
const REF_FIELDS = new WeakMap<ObjectType, readonly (readonly [string, string])[]>();

/** A type's reference fields: [field name, the type its values name]. */
function refFieldsOf(type: ObjectType): readonly (readonly [string, string])[] {
  let refs = REF_FIELDS.get(type);
  if (!refs) {
    refs = Object.entries(type.fields).flatMap(([name, field]) =>
      (field.kind === 'string' || field.kind === 'strings') && field.ref ? [[name, field.ref] as const] : [],
    );
    REF_FIELDS.set(type, refs);
  }
  return refs;
}

/**
 * Reference fields must name existing objects; unchanged values are not re-checked. With
 * `lockRows` (PostgreSQL, where writers run concurrently) each named object is read FOR KEY SHARE,
 * so a concurrent delete of it waits for this transaction instead of leaving a dangling reference.
 */
export async function checkRefs(
  tx: Tx,
  type: ObjectType,
  doc: Doc,
  previous: Doc | undefined,
  lockRows = false,
) {
  for (const [name, ref] of refFieldsOf(type)) {
    const value = doc[name];
    const ids = (Array.isArray(value) ? value : [value]).filter(
      (v): v is string => typeof v === 'string' && v !== '',
    );
    const before = previous?.[name];
    const old = new Set(Array.isArray(before) ? before : [before]);
    for (const id of ids) {
      if (old.has(id)) continue;
      const q = tx.selectFrom('objects').select('id').where('type', '=', ref).where('id', '=', id);
      const found = await (lockRows ? q.forKeyShare() : q).executeTakeFirst();
      if (!found) throw new ApiError('InvalidField', `${name}: ${ref} ${id} does not exist`, { field: name });
    }
  }
}

/** The client body normalized to the writable fields (write-only ones dropped), through the type's prepare hook. */
export async function prepare(
  type: ObjectType,
  input: unknown,
  previous: Doc | undefined,
  secret: Doc,
  actor?: Actor,
) {
  const doc = normalize(bodyFields(type), input, previous);
  for (const name of Object.keys(type.writeOnly ?? {})) delete doc[name];
  const ctx = {
    doc,
    input: input as Doc,
    secret: { ...secret },
    previous,
    isCreate: previous === undefined,
    actor,
    response: undefined as Doc | undefined,
  };
  await type.prepare?.(ctx);
  return ctx;
}

/** The object's keys in object_keys: its unique fields (lower-cased) and the type's lookup keys. */
export function keysOf(type: ObjectType, doc: Doc, secret: Doc): Map<string, string> {
  const keys = new Map<string, string>();
  for (const name of type.unique ?? []) {
    const v = doc[name];
    if (typeof v === 'string' && v !== '') keys.set(name, v.toLowerCase());
  }
  for (const [k, v] of Object.entries(type.lookupKeys?.(doc, secret) ?? {})) keys.set(k, v);
  return keys;
}

/** Claims `keys` for the object, replacing `oldKeys`; 409 when another object of the type holds one. */
export async function writeKeys(
  tx: Tx,
  type: ObjectType,
  id: string,
  keys: Map<string, string>,
  oldKeys: Map<string, string>,
) {
  const same = keys.size === oldKeys.size && [...keys].every(([k, v]) => oldKeys.get(k) === v);
  if (same) return;
  for (const [name, value] of keys) {
    const owner = await tx
      .selectFrom('object_keys')
      .select('id')
      .where('type', '=', type.kind)
      .where('name', '=', name)
      .where('value', '=', value)
      .executeTakeFirst();
    if (owner && owner.id !== id) {
      throw new ApiError('Conflict', `another ${type.kind} already has this ${name}`, { field: name });
    }
  }
  await tx.deleteFrom('object_keys').where('type', '=', type.kind).where('id', '=', id).execute();
  if (keys.size > 0) {
    await tx
      .insertInto('object_keys')
      .values([...keys].map(([name, value]) => ({ type: type.kind, name, value, id })))
      .execute();
  }
}

/** The type's fields with readOnly cleared at every depth, for the service's own writes (systemPut). */
export function allWritable(type: ObjectType) {
  const strip = (fields: ObjectType['fields']): ObjectType['fields'] =>
    Object.fromEntries(
      Object.entries(fields).map(([k, f]) => [
        k,
        f.kind === 'object' ? { ...f, readOnly: false, fields: strip(f.fields) } : { ...f, readOnly: false },
      ]),
    );
  return strip(type.fields);
}
