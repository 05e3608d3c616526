import { randomInt } from 'node:crypto';
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
/** 14 random letters and digits (about 72 bits), as the spec's example. */
export function newId(): string {
  let s = '';
  for (let i = 0; i < 14; i++) s += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return s;
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
