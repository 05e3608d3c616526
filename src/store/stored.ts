import { randomFillSync } from 'node:crypto';
import type { Doc } from '../schema/fields.js';

/*
 * An object as the store hands it out, made from its row: what ObjectStore's reads and writes
 * return (objects.ts), and the identifiers and ETag rules they share.
 */

export interface StoredObject {
  id: string;
  doc: Doc;
  /** The JSON text of doc, as served. */
  data: string;
  etag: string;
  createTime: number;
  modifyTime: number;
}

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** The creation time's characters: milliseconds in base 36, zero-padded, enough until the year 5188. */
const ID_TIME_CHARS = 9;
/** Random characters after the time: about 57 bits, so IDs made in the same millisecond, by any instance, do not meet. */
const ID_RANDOM_CHARS = 11;

/**
 * A new identifier: 20 lowercase letters and digits, the creation time in milliseconds (base 36,
 * whose digits sort as they count) followed by 11 random characters. IDs made later sort after
 * earlier ones, so a new row goes at the right-hand end of every index keyed by ID (the objects'
 * primary key, the list indexes' tie-breaker, the audit trail's ID) instead of a random page of
 * each: a group of writes dirties a few pages rather than one per row per index, and SQLite's
 * POST /users rose by about two fifths (docs/decisions.md, "IDs begin with their creation time"). The
 * time is no secret: X-Create-Time gives it to whoever can read the object, and an App that sees a
 * user's ID learns when the account was made (docs/security.md). IDs are never credentials.
 */
export function newId(now: number = Date.now()): string {
  let s = Math.max(0, Math.floor(now)).toString(36).padStart(ID_TIME_CHARS, '0');
  for (let i = 0; i < ID_RANDOM_CHARS; i++) s += ID_ALPHABET[randomBelow36()];
  return s;
}

/** Bytes below this are used, as byte % 36: 252 = 7 × 36, so every remainder is equally likely. */
const UNBIASED_BYTES = 252;
// module-state: random bytes drawn ahead from the CSPRNG, as crypto.randomInt's own cache is; each is used once.
const randomPool = Buffer.alloc(4096);
// module-state: the next unused byte of randomPool (its length: all used).
let randomNext = randomPool.length;

/**
 * Takes `n` unused bytes of randomPool, drawing it anew when fewer are left (those are never
 * used); returns where they start.
 */
function takeRandom(n: number): number {
  if (randomNext + n > randomPool.length) {
    randomFillSync(randomPool);
    randomNext = 0;
  }
  const start = randomNext;
  randomNext += n;
  return start;
}

/**
 * A uniformly random number in 0..35 from the CSPRNG. crypto.randomInt per character cost more
 * than an ID deserves (each call checks its arguments and takes from its cache separately); this
 * draws 4 KiB at a time and rejects bytes of 252 and above.
 */
function randomBelow36(): number {
  for (;;) {
    const b = randomPool[takeRandom(1)] as number;
    if (b < UNBIASED_BYTES) return b % 36;
  }
}

/** Random bytes in an ETag: 96 bits, so two versions of an object never share one. */
const ETAG_RANDOM_BYTES = 12;

/**
 * A new strong ETag: 12 random bytes, base64url, in quotes. Taken from the same pool as IDs:
 * crypto.randomBytes for each one went to OpenSSL every time and was about a fifteenth of a
 * POST /users on SQLite (docs/benchmarks.md, "ETags from the pool").
 */
export function newEtag(): string {
  const start = takeRandom(ETAG_RANDOM_BYTES);
  return `"${randomPool.toString('base64url', start, start + ETAG_RANDOM_BYTES)}"`;
}

/** Does one of the comma-separated ETags in an If-Match / If-None-Match header name `etag`? */
export function etagMatches(header: string, etag: string, weak: boolean): boolean {
  const strip = (t: string) => (weak ? t.replace(/^W\//, '') : t);
  return header
    .split(',')
    .map((t) => t.trim())
    .some((t) => t === '*' || strip(t) === strip(etag));
}

/** An object's row as read (the columns every read selects). */
export type StoredRow = { id: string; data: string; etag: string; create_time: number; modify_time: number };

/**
 * A stored row as an object. Its `doc` is parsed from `data` when first read: a GET answers with
 * `data` as stored and, for a caller with access to all objects of the type, never needs the
 * parsed form (parsing a user was a tenth of a GET's server time). A class, not an object literal
 * with a getter: V8 builds such a literal in its slow path, about a microsecond each, and every
 * read by ID makes one. `doc` lives on the prototype, so a spread copies the other fields only:
 * copies name `doc` themselves (see `ObjectStore.replace` in objects.ts).
 */
class StoredRowObject implements StoredObject {
  id: string;
  data: string;
  etag: string;
  createTime: number;
  modifyTime: number;
  #doc: Doc | undefined;

  constructor(row: StoredRow) {
    this.id = row.id;
    this.data = row.data;
    this.etag = row.etag;
    this.createTime = Number(row.create_time);
    this.modifyTime = Number(row.modify_time);
  }

  get doc(): Doc {
    this.#doc ??= JSON.parse(this.data) as Doc;
    return this.#doc;
  }

  set doc(value: Doc) {
    this.#doc = value;
  }
}

export function toStored(row: StoredRow): StoredObject {
  return new StoredRowObject(row);
}

/** A stored row with its secret fields: the object above, with `secret` as an own field. */
export function toStoredWithSecret(
  row: StoredRow & { secret: string | null },
): StoredObject & { secret: Doc } {
  return Object.assign(new StoredRowObject(row), { secret: parseSecret(row.secret) });
}

/** The secret fields of a row: {} when there are none. */
export const parseSecret = (text: string | null): Doc => (text ? (JSON.parse(text) as Doc) : {});
/** The secret fields as stored: null when there are none. */
export const secretText = (s: Doc) => (Object.keys(s).length > 0 ? JSON.stringify(s) : null);
