import { type RawBuilder, sql } from 'kysely';
import { ApiError } from '../core/errors.js';
import { unstorable } from '../core/text.js';
import { normalizeTimestamp, type ScalarField, scalarAt } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import type { Db } from './db.js';
import { listIndexFor } from './listindexes.js';

/**
 * The list query language of GET /<type>: filters, ordering and keyset cursors, and the SQL
 * that runs a list (listObjects, below; ObjectStore.list). Parsing is dialect-independent and
 * validates every name against the type's fields, so the SQL built from it only ever contains
 * field paths we declared.
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

// ---- the SQL ----------------------------------------------------------------------------------

export interface ListPage {
  /** Cursor headers, set only when limit is given and below 1000. */
  startCursor?: string;
  endCursor?: string;
  /** Chunks of JSON-lines text, fetched from the database as they are consumed. */
  chunks: AsyncIterable<string>;
}

const CHUNK = 1000;

/** Streams a list as JSON lines of ListItem {"ID","Item"} (ObjectStore.list). */
export async function listObjects(
  db: Db,
  type: ObjectType,
  q: ListQuery,
  /** A table of the objects table's shape (type, id, data; PostgreSQL: doc), e.g. audit_trail. */
  table: 'objects' | 'audit_trail' = 'objects',
): Promise<ListPage> {
  const d = db.dialect;
  const keyExprs = q.order.map((k) => fieldExpr(d, k));
  // The type as a literal, not a parameter: SQLite uses a partial index (migration 0012) only when
  // the query's WHERE names its type at prepare time. Kinds are the registry's own names.
  const baseWhere: RawBuilder<unknown>[] = [sql`type = ${sql.lit(type.kind)}`];
  for (const f of q.filters) {
    const expr = fieldExpr(d, f);
    const value = d === 'sqlite' && typeof f.value === 'boolean' ? Number(f.value) : f.value;
    baseWhere.push(sql`${expr} ${sql.raw(f.op)} ${value}`);
  }
  if (q.start) baseWhere.push(positionCond(keyExprs, q.order, q.start, 'from'));
  if (q.end) baseWhere.push(positionCond(keyExprs, q.order, q.end, 'before'));
  const keyCols = keyExprs.map((e, i) => sql`${e} AS ${sql.ref(`k${i}`)}`);
  // "end" without "start" and with a limit: the last rows before end, read backwards.
  const backwards = q.end !== undefined && q.start === undefined && q.limit !== undefined;
  const orderBy = (reverse: boolean) =>
    sql.join(keyExprs.map((e, i) => (q.order[i]?.desc !== reverse ? sql`${e} DESC` : sql`${e} ASC`)));

  // SQLite without statistics guesses that a type holds a handful of rows, and sorts them rather
  // than read the index in order: it is told. PostgreSQL's planner has autovacuum's statistics.
  const index = table === 'objects' && q.order[0] ? listIndexFor(type.kind, q.order[0].path) : undefined;
  const from = index && d === 'sqlite' ? sql`objects INDEXED BY ${sql.raw(index.name)}` : sql.table(table);
  const fetch = async (extra: RawBuilder<unknown> | undefined, n: number, offset: number) => {
    const where = extra ? [...baseWhere, extra] : baseWhere;
    const res = await sql<
      { id: string; data: string } & Record<string, unknown>
    >`SELECT id, data, ${sql.join(keyCols)} FROM ${from} WHERE ${sql.join(where, sql` AND `)} ORDER BY ${orderBy(backwards)} LIMIT ${n} OFFSET ${offset}`.execute(
      db.kysely,
    );
    const rows = res.rows;
    if (backwards) rows.reverse();
    return rows;
  };
  const keyOf = (row: Record<string, unknown>) => q.order.map((_, i) => row[`k${i}`]);
  const lines = (rows: { id: string; data: string }[]) => {
    let s = '';
    for (const r of rows) s += `{"ID":${JSON.stringify(r.id)},"Item":${r.data}}\n`;
    return s;
  };

  const limit = q.limit ?? Number.POSITIVE_INFINITY;
  const first = await fetch(undefined, Math.min(CHUNK, limit), q.offset);
  const page: ListPage = { chunks: emptyChunks() };
  if (q.limit !== undefined && q.limit < 1000) {
    const head = first[0];
    const tail = first[first.length - 1];
    page.startCursor = head ? encodeCursor(q.signature, keyOf(head), false) : '';
    page.endCursor = tail
      ? encodeCursor(q.signature, keyOf(tail), true)
      : q.start
        ? encodeCursor(q.signature, q.start.key, q.start.after)
        : '';
  }
  const self = { fetch, keyOf, lines, keyExprs, order: q.order };
  page.chunks = (async function* () {
    let rows = first;
    let remaining = limit;
    while (true) {
      if (rows.length > 0) yield lines(rows);
      remaining -= rows.length;
      const last = rows[rows.length - 1];
      if (backwards || !last || rows.length < CHUNK || remaining <= 0) return;
      const after = positionCond(self.keyExprs, self.order, { key: self.keyOf(last), after: true }, 'from');
      rows = await self.fetch(after, Math.min(CHUNK, remaining), 0);
    }
  })();
  return page;
}

async function* emptyChunks(): AsyncIterable<string> {}

/** SQL for a field's value, typed so that comparisons and sorting agree on both backends. */
function fieldExpr(dialect: Db['dialect'], k: Pick<SortKey, 'path' | 'field'>): RawBuilder<unknown> {
  if (k.path === 'ID') return sql`id`;
  const parts = k.path.split('.');
  if (dialect === 'sqlite') {
    const json = sql.raw(`json_extract(data, '$.${parts.join('.')}')`);
    const zero =
      k.field.kind === 'boolean' ? 0 : k.field.kind === 'integer' || k.field.kind === 'number' ? 0 : '';
    return sql`coalesce(${json}, ${sql.lit(zero)})`;
  }
  const text = sql.raw(`(doc #>> '{${parts.join(',')}}')`);
  switch (k.field.kind) {
    case 'boolean':
      return sql`coalesce(${text}::boolean, false)`;
    case 'integer':
    case 'number':
      return sql`coalesce(${text}::numeric, 0)`;
    default:
      return sql`(coalesce(${text}, '') collate "C")`;
  }
}

/**
 * The keyset condition for a position. 'from': records at or after it; 'before': records
 * strictly before it. A position is "at record K" (after=false) or "right after K" (after=true).
 */
function positionCond(
  exprs: RawBuilder<unknown>[],
  order: SortKey[],
  pos: Cursor,
  side: 'from' | 'before',
): RawBuilder<unknown> {
  // Rows beyond K in iteration order (or before it, for 'before'), plus K itself when the position includes it.
  const includeEqual = side === 'from' ? !pos.after : pos.after;
  const onward = side === 'from' ? !order[0]?.desc : !!order[0]?.desc;
  // The first key's bound, implied by what follows: with it the database seeks to the position in
  // an index on the order instead of reading every row before it.
  const bound = sql`${exprs[0]} ${sql.raw(onward ? '>=' : '<=')} ${pos.key[0]}`;
  // Every key the same way: one row-value comparison. PostgreSQL seeks with it to the exact
  // position, even inside a long run of equal first keys; SQLite seeks by the bound alone.
  if (order.every((k) => k.desc === order[0]?.desc)) {
    const op = onward ? (includeEqual ? '>=' : '>') : includeEqual ? '<=' : '<';
    return sql`(${bound} AND (${sql.join(exprs)}) ${sql.raw(op)} (${sql.join(pos.key.map((k) => sql`${k}`))}))`;
  }
  const terms: RawBuilder<unknown>[] = [];
  for (let i = 0; i < exprs.length; i++) {
    const eqs = exprs.slice(0, i).map((e, j) => sql`${e} = ${pos.key[j]}`);
    const forward = side === 'from' ? !order[i]?.desc : !!order[i]?.desc;
    const cmp = sql`${exprs[i]} ${sql.raw(forward ? '>' : '<')} ${pos.key[i]}`;
    terms.push(sql`(${sql.join([...eqs, cmp], sql` AND `)})`);
  }
  if (includeEqual)
    terms.push(
      sql`(${sql.join(
        exprs.map((e, j) => sql`${e} = ${pos.key[j]}`),
        sql` AND `,
      )})`,
    );
  return sql`(${bound} AND (${sql.join(terms, sql` OR `)}))`;
}
