import { type RawBuilder, sql } from 'kysely';
import type { ObjectType } from '../schema/type.js';
import type { Db } from './db.js';
import { listIndexFor } from './listindexes.js';
import { type Cursor, encodeCursor, type ListQuery, type SortKey } from './listquery.js';

/*
 * The SQL that runs a list (ObjectStore.list, the audit trail's list): a parsed ListQuery
 * (listquery.ts) read in its order, from its cursors, a chunk at a time.
 */

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
  const filterWhere: RawBuilder<unknown>[] = [sql`type = ${sql.lit(type.kind)}`];
  for (const f of q.filters) {
    const expr = fieldExpr(d, f);
    const value = d === 'sqlite' && typeof f.value === 'boolean' ? Number(f.value) : f.value;
    filterWhere.push(sql`${expr} ${sql.raw(f.op)} ${value}`);
  }
  const keyCols = keyExprs.map((e, i) => sql`${e} AS ${sql.ref(`k${i}`)}`);
  // "end" without "start" and with a limit: the last rows before end, read backwards.
  const backwards = q.end !== undefined && q.start === undefined && q.limit !== undefined;
  /** The order from key `from` on (the keys before it are fixed), by expression or by result column. */
  const orderBy = (reverse: boolean, from = 0, byColumn = false) =>
    sql.join(
      keyExprs.slice(from).map((expr, j) => {
        const e = byColumn ? sql.ref(`k${from + j}`) : expr;
        return q.order[from + j]?.desc !== reverse ? sql`${e} DESC` : sql`${e} ASC`;
      }),
    );

  // SQLite without statistics guesses that a type holds a handful of rows, and sorts them rather
  // than read the index in order: it is told. PostgreSQL's planner has autovacuum's statistics.
  const index = table === 'objects' && q.order[0] ? listIndexFor(type.kind, q.order[0].path) : undefined;
  const from = index && d === 'sqlite' ? sql`objects INDEXED BY ${sql.raw(index.name)}` : sql.table(table);
  // SQLite seeks in an index by the first key only when a position's condition is one comparison
  // of several keys: inside a long run of equal first values (users without an e-mail address) it
  // read the run from its start for every page. So a read from a position there is the union of
  // the position's ranges (positionRanges), each one index seek; PostgreSQL seeks with the
  // row-value comparison itself.
  const byRanges = d === 'sqlite' && index !== undefined && keyExprs.length > 1;
  /** `n` rows from `offset`, in the order, after the position `next` (further chunks) if given. */
  const fetch = async (next: Cursor | undefined, n: number, offset: number) => {
    const bounds: { pos: Cursor; side: 'from' | 'before' }[] = [];
    if (q.start) bounds.push({ pos: q.start, side: 'from' });
    if (q.end) bounds.push({ pos: q.end, side: 'before' });
    if (next) bounds.push({ pos: next, side: 'from' });
    // The position the read starts at: the last one in its direction.
    const seek = byRanges
      ? backwards
        ? bounds.find((b) => b.side === 'before')
        : bounds.findLast((b) => b.side === 'from')
      : undefined;
    const where = [...filterWhere];
    for (const b of bounds) if (b !== seek) where.push(positionCond(keyExprs, q.order, b.pos, b.side));
    const all = sql.join(where, sql` AND `);
    const statement = seek
      ? sql`SELECT * FROM (${sql.join(
          positionRanges(keyExprs, q.order, seek.pos, seek.side).map((r) => {
            const order = r.from < keyExprs.length ? sql` ORDER BY ${orderBy(backwards, r.from)}` : sql``;
            return sql`SELECT * FROM (SELECT id, data, ${sql.join(keyCols)} FROM ${from} WHERE ${all} AND ${r.cond}${order} LIMIT ${n + offset})`;
          }),
          sql` UNION ALL `,
        )}) ORDER BY ${orderBy(backwards, 0, true)} LIMIT ${n} OFFSET ${offset}`
      : sql`SELECT id, data, ${sql.join(keyCols)} FROM ${from} WHERE ${all} ORDER BY ${orderBy(backwards)} LIMIT ${n} OFFSET ${offset}`;
    const res = await (
      statement as RawBuilder<{ id: string; data: string } & Record<string, unknown>>
    ).execute(db.kysely);
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
  const self = { fetch, keyOf, lines };
  page.chunks = (async function* () {
    let rows = first;
    let remaining = limit;
    while (true) {
      if (rows.length > 0) yield lines(rows);
      remaining -= rows.length;
      const last = rows[rows.length - 1];
      if (backwards || !last || rows.length < CHUNK || remaining <= 0) return;
      rows = await self.fetch({ key: self.keyOf(last), after: true }, Math.min(CHUNK, remaining), 0);
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
  const terms = positionRanges(exprs, order, pos, side).map((r) => sql`(${r.cond})`);
  return sql`(${bound} AND (${sql.join(terms, sql` OR `)}))`;
}

/**
 * A position's condition as disjoint ranges, whose union it is: for each key i, the rows whose
 * keys before i equal the position's and whose key i lies beyond it on the side; then the record
 * itself, when the position includes it. `from`: the first key a range's rows differ in (the
 * keys before it are fixed), so each range is one index seek, in the order of the keys from there.
 */
function positionRanges(
  exprs: RawBuilder<unknown>[],
  order: SortKey[],
  pos: Cursor,
  side: 'from' | 'before',
): { cond: RawBuilder<unknown>; from: number }[] {
  const includeEqual = side === 'from' ? !pos.after : pos.after;
  const equal = (n: number) => exprs.slice(0, n).map((e, j) => sql`${e} = ${pos.key[j]}`);
  const ranges: { cond: RawBuilder<unknown>; from: number }[] = [];
  for (let i = 0; i < exprs.length; i++) {
    const forward = side === 'from' ? !order[i]?.desc : !!order[i]?.desc;
    const cmp = sql`${exprs[i]} ${sql.raw(forward ? '>' : '<')} ${pos.key[i]}`;
    ranges.push({ cond: sql.join([...equal(i), cmp], sql` AND `), from: i });
  }
  if (includeEqual) ranges.push({ cond: sql.join(equal(exprs.length), sql` AND `), from: exprs.length });
  return ranges;
}
