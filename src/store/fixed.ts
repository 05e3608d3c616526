import { CompiledQuery, type Kysely, type QueryExecutorProvider } from 'kysely';
import type { Db } from './db.js';

/**
 * Statements of fixed shape (sessions, sign-in counters, the audit trail): built and compiled by
 * Kysely once per database handle, then run with new values. On a primary-key lookup or a one-row
 * write, Kysely's builder and compiler cost more than the database, and on SQLite its
 * asynchronous connection hand-off does too: outside a transaction a statement runs at once on a
 * connection of the handle (Db.runSync), inside one (or on PostgreSQL) through Kysely as before.
 *
 * A statement is named, and built by a function of named values. The first run builds it twice,
 * once with stand-ins for the values and once with the values themselves, and checks that both
 * give the same SQL and the same parameters once the stand-ins are replaced: a builder whose SQL
 * depends on its values (or that computes with them) fails loudly instead of running wrong SQL.
 */
/** A query builder or a raw `sql` template (which compiles with an executor). */
export interface Buildable {
  compile(executorProvider: QueryExecutorProvider): CompiledQuery<unknown>;
}

/** The values of one run, by name (each a parameter of the statement). */
export type FixedValues<V = Record<string, string | number>> = { [K in keyof V]: string | number };

interface Shape {
  text: string;
  /** Each parameter: the name of a value, or a constant of the statement. */
  params: ({ arg: string } | { value: unknown })[];
}

export interface FixedResult<R> {
  rows: R[];
  /** Rows inserted, updated or deleted. */
  affected: number;
}

// module-state: compiled SQL per database handle (a pure function of the builder and the dialect); gone with the handle.
const shapes = new WeakMap<Db, Map<string, Shape>>();

function standIns(
  name: string,
  values: object,
): { stand: Record<string, string | number>; back: Map<unknown, string> } {
  const stand: Record<string, string | number> = {};
  const back = new Map<unknown, string>();
  let i = 0;
  for (const [k, v] of Object.entries(values)) {
    const s = typeof v === 'number' ? -(7_340_000_000_000 + i++) : `\u0001${name}:${k}\u0001`;
    stand[k] = s;
    back.set(s, k);
  }
  return { stand, back };
}

function shapeOf<V extends FixedValues<V>>(
  db: Db,
  name: string,
  build: (kysely: Kysely<never>, v: V) => Buildable,
  values: V,
): Shape {
  let byName = shapes.get(db);
  if (!byName) {
    byName = new Map();
    shapes.set(db, byName);
  }
  const known = byName.get(name);
  if (known) return known;
  const k = db.kysely as unknown as Kysely<never>;
  const { stand, back } = standIns(name, values);
  const generic = build(k, stand as V).compile(k);
  const shape: Shape = {
    text: generic.sql,
    params: generic.parameters.map((p) => (back.has(p) ? { arg: back.get(p) as string } : { value: p })),
  };
  const real = build(k, values).compile(k);
  const used = new Set(shape.params.flatMap((p) => ('arg' in p ? [p.arg] : [])));
  const same =
    Object.keys(values).every((k) => used.has(k)) &&
    real.sql === shape.text &&
    real.parameters.length === shape.params.length &&
    bind(shape, values).every((p, i) => p === real.parameters[i]);
  if (!same) throw new Error(`fixed statement ${name}: its SQL depends on its values, or leaves one out`);
  byName.set(name, shape);
  return shape;
}

const bind = (shape: Shape, values: object): unknown[] =>
  shape.params.map((p) => ('arg' in p ? (values as Record<string, unknown>)[p.arg] : p.value));

/**
 * Runs the named statement with `values`. `executor`: a transaction to run it in (then always
 * through Kysely); otherwise SQLite runs it at once when no transaction is open on the writer.
 */
export async function fixedQuery<R, V extends FixedValues<V>>(
  db: Db,
  name: string,
  build: (kysely: Kysely<never>, v: V) => Buildable,
  values: V,
  executor?: Pick<Kysely<never>, 'executeQuery'>,
): Promise<FixedResult<R>> {
  const shape = shapeOf(db, name, build, values);
  const params = bind(shape, values);
  if (!executor) {
    const now = db.runSync?.<R>(shape.text, params);
    if (now) return now;
  }
  const r = await (executor ?? db.kysely).executeQuery<R>(CompiledQuery.raw(shape.text, params));
  return { rows: r.rows, affected: Number(r.numAffectedRows ?? 0n) };
}
