import type pg from 'pg';

/**
 * Named (prepared) statements on PostgreSQL. node-postgres sends an unnamed statement by default,
 * which the server parses, analyses and plans on every run: for the write path's one statement
 * that was two fifths of PostgreSQL's CPU per write (docs/benchmarks.md, "Prepared statements
 * and commits side by side").
 * A named statement is parsed once per connection, and after five runs the server may keep a
 * generic plan as well.
 *
 * - Only statements run with parameters are named (Kysely's, the write path's). BEGIN, COMMIT and
 *   other texts without parameters run as before.
 * - Each named statement stays in every connection's memory on the server until the connection
 *   closes, so what is named is bounded: texts with more than MAX_PARAMETERS parameters run
 *   unnamed (their shape follows the number of values: multi-row inserts such as the audit
 *   trail's batches, long IN lists), and at most MAX_NAMED distinct texts per pool are named
 *   (list filters make texts vary with the request); later ones run unnamed.
 * - A connection pooler between the service and PostgreSQL must keep prepared statements per
 *   client (session pooling, or PgBouncer 1.21 or later with max_prepared_statements): see
 *   docs/scaling.md.
 */

/** Distinct SQL texts named per pool; more run unnamed. */
export const MAX_NAMED = 500;

/** Statements with more parameters than this run unnamed. */
export const MAX_PARAMETERS = 32;

/**
 * PostgreSQL refuses to run a prepared statement whose result columns changed since it was
 * prepared (a migration added a column under `SELECT *` while this process ran): SQLSTATE 0A000
 * with these words. The statement stays broken on its connection, which is then closed
 * (src/store/db.ts, dropUnusable).
 */
const RESULT_TYPE_CHANGED = 'cached plan must not change result type';

export const resultTypeChanged = (err: unknown) =>
  err instanceof Error && err.message.includes(RESULT_TYPE_CHANGED);

/** The names given to SQL texts, per pool: the same text gets the same name on every connection. */
export class StatementNames {
  private readonly names = new Map<string, string>();

  constructor(private readonly max = MAX_NAMED) {}

  /** The name for `text`, or undefined when the bound is reached and `text` has none yet. */
  nameOf(text: string): string | undefined {
    let name = this.names.get(text);
    if (name === undefined && this.names.size < this.max) {
      name = `gatehouse_${this.names.size}`;
      this.names.set(text, name);
    }
    return name;
  }
}

/**
 * Makes `client.query(text, values)` run a named statement. Other call forms (a config object, a
 * cursor, a text without values) pass through unchanged.
 */
export function namePreparedStatements(client: pg.Client, names: StatementNames) {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    // (text, values) from Kysely and the write path; (text, values, callback) from pool.query.
    const [text, values, callback] = args;
    const plain =
      typeof text === 'string' &&
      Array.isArray(values) &&
      values.length <= MAX_PARAMETERS &&
      (args.length === 2 || (args.length === 3 && typeof callback === 'function'));
    const name = plain ? names.nameOf(text) : undefined;
    return name === undefined ? query(...args) : query({ name, text, values }, ...args.slice(2));
  };
}
