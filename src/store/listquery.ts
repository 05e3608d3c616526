import { ApiError } from '../core/errors.js';
import { unstorable } from '../core/text.js';
import { normalizeTimestamp, type ScalarField, scalarAt } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';

/**
 * The list query language of GET /<type>: filters, ordering and keyset cursors, parsed here; the
 * SQL that runs a list is listread.ts (listObjects; ObjectStore.list). Parsing is
 * dialect-independent and validates every name against the type's fields, so the SQL built from
 * it only ever contains field paths we declared.
 */
export type Operator = '<' | '<=' | '=' | '>=' | '>';

export interface SortKey {
  /** Dotted field path, or "ID". */
  path: string;
  field: ScalarField;
  desc: boolean;
}

export interface Filter {
  path: string;
  field: ScalarField;
  op: Operator;
  value: string | number | boolean;
}

export interface Cursor {
  /** Values of the sort keys (the id last) of the record the position refers to. */
  key: unknown[];
  /** true: the position right after that record; false: the position at it. */
  after: boolean;
}

export interface ListQuery {
  limit: number | undefined;
  offset: number;
  order: SortKey[];
  filters: Filter[];
  start: Cursor | undefined;
  end: Cursor | undefined;
  /** Identifies the order, so a cursor from another order is refused. */
  signature: string;
}

export interface RawListQuery {
  limit?: string | string[];
  offset?: string | string[];
  start?: string | string[];
  end?: string | string[];
  order?: string | string[];
  filter?: string | string[];
}

const ID_FIELD: ScalarField = { kind: 'string', default: '' };
const PATH = /^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$/;

const many = (v: string | string[] | undefined): string[] =>
  v === undefined ? [] : Array.isArray(v) ? v : [v];
function one(v: string | string[] | undefined, name: string): string | undefined {
  const all = many(v);
  if (all.length > 1) throw new ApiError('BadRequest', `${name} may be given only once`, { field: name });
  return all[0];
}

function fieldOf(
  type: ObjectType,
  path: string,
  errorKind: 'InvalidFilter' | 'InvalidOrder',
  param: string,
): ScalarField {
  if (path === 'ID') return ID_FIELD;
  const field = PATH.test(path) ? scalarAt(type.fields, path) : undefined;
  if (!field) {
    throw new ApiError(
      errorKind,
      `${path} is not a field of ${type.kind} that lists can ${errorKind === 'InvalidFilter' ? 'filter' : 'order'} by`,
      {
        field: param,
      },
    );
  }
  return field;
}

function wholeNumber(raw: string | undefined, name: string, max: number): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d{1,15}$/.test(raw) || Number(raw) > max) {
    throw new ApiError('InvalidLimit', `${name} must be a whole number from 0 to ${max}`, { field: name });
  }
  return Number(raw);
}

const FILTER = /^\s*([A-Za-z][A-Za-z0-9.]*)\s*(<=|>=|<|>|=)\s*(.+?)\s*$/s;

export function parseFilter(type: ObjectType, expr: string): Filter {
  const m = FILTER.exec(expr);
  if (!m) {
    throw new ApiError(
      'InvalidFilter',
      `filter ${JSON.stringify(expr)} is not of the form: field operator value (operators < <= = >= >)`,
      {
        field: 'filter',
      },
    );
  }
  const path = m[1] as string;
  const op = m[2] as Operator;
  const field = fieldOf(type, path, 'InvalidFilter', 'filter');
  let value: unknown;
  try {
    value = JSON.parse(m[3] as string);
  } catch {
    throw new ApiError(
      'InvalidFilter',
      `the value in filter ${JSON.stringify(expr)} is not JSON (strings need quotes)`,
      { field: 'filter' },
    );
  }
  const expected =
    field.kind === 'integer' || field.kind === 'number'
      ? 'number'
      : field.kind === 'boolean'
        ? 'boolean'
        : 'string';
  if (typeof value !== expected) {
    throw new ApiError(
      'InvalidFilter',
      `${path} is a ${field.kind}; the filter value must be a JSON ${expected}`,
      { field: 'filter' },
    );
  }
  // Compared in the store: text neither backend can take (src/core/text.ts) is refused here.
  if (typeof value === 'string' && unstorable(value)) {
    throw new ApiError(
      'InvalidFilter',
      `the value in a filter on ${path} may not contain U+0000 or an unpaired UTF-16 surrogate`,
      { field: 'filter' },
    );
  }
  if (field.kind === 'timestamp') {
    const ts = normalizeTimestamp(value as string);
    if (ts === undefined)
      throw new ApiError('InvalidFilter', `${path} needs an RFC 3339 timestamp`, { field: 'filter' });
    value = ts;
  }
  return { path, field, op, value: value as string | number | boolean };
}

export function decodeCursor(
  raw: string,
  signature: string,
  keyCount: number,
  param: string,
): Cursor | undefined {
  if (raw === '') return undefined;
  let c: unknown;
  try {
    c = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    c = undefined;
  }
  const ok =
    Array.isArray(c) &&
    c.length === 3 &&
    typeof c[0] === 'string' &&
    typeof c[1] === 'boolean' &&
    Array.isArray(c[2]) &&
    c[2].length === keyCount &&
    c[2].every(
      (v: unknown) =>
        v === null ||
        typeof v === 'number' ||
        typeof v === 'boolean' ||
        // The key is compared in the store: no text that a backend cannot take (src/core/text.ts).
        (typeof v === 'string' && !unstorable(v)),
    );
  if (!ok)
    throw new ApiError('InvalidCursor', `${param} is not a cursor returned by this list`, { field: param });
  const [sig, after, key] = c as [string, boolean, unknown[]];
  if (sig !== signature) {
    throw new ApiError(
      'InvalidCursor',
      `${param} was made for another order; use the same order parameters`,
      { field: param },
    );
  }
  return { after, key };
}

export function encodeCursor(signature: string, key: unknown[], after: boolean): string {
  return Buffer.from(JSON.stringify([signature, after, key]), 'utf8').toString('base64url');
}

export function parseListQuery(type: ObjectType, raw: RawListQuery): ListQuery {
  const limit = wholeNumber(one(raw.limit, 'limit'), 'limit', 1_000_000_000);
  const offset = wholeNumber(one(raw.offset, 'offset'), 'offset', 1_000_000_000) ?? 0;
  const order: SortKey[] = [];
  for (const o of many(raw.order)) {
    const desc = o.startsWith('-');
    const path = desc ? o.slice(1) : o;
    if (path === 'ID') {
      order.push({ path, field: ID_FIELD, desc });
      break; // ID is unique: later keys could never matter
    }
    order.push({ path, field: fieldOf(type, path, 'InvalidOrder', 'order'), desc });
  }
  // The id ends every order, so positions are total and cursors unambiguous.
  if (!order.some((k) => k.path === 'ID')) order.push({ path: 'ID', field: ID_FIELD, desc: false });
  const signature = order.map((k) => (k.desc ? '-' : '') + k.path).join(',');
  const filters = many(raw.filter).map((expr) => parseFilter(type, expr));
  const start = decodeCursor(one(raw.start, 'start') ?? '', signature, order.length, 'start');
  const end = decodeCursor(one(raw.end, 'end') ?? '', signature, order.length, 'end');
  return { limit, offset, order, filters, start, end, signature };
}
