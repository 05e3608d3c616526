import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/store/db.js';
import { MAX_PARAMETERS, namePreparedStatements, StatementNames } from '../../src/store/pgstatements.js';
import { backends } from '../helpers.js';
import { createPgDatabase } from '../pg.js';

/** The texts prepared on the connection that runs this (one connection: the pools below hold one). */
const prepared = async (client: pg.Pool | pg.Client) =>
  (await client.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements')).rows.map(
    (r) => r.statement,
  );

describe.skipIf(!backends().includes('postgres'))('named statements on PostgreSQL', () => {
  let url = '';
  let drop: () => Promise<void>;
  let db: Db;

  beforeAll(async () => {
    ({ url, drop } = await createPgDatabase('gh_stmt'));
    db = openDb(url, { poolSize: 1 });
  });
  afterAll(async () => {
    await db?.close();
    await drop?.();
  });

  it('a statement with parameters is prepared once per connection and reused', async () => {
    const text = 'SELECT $1::int + 1 AS n';
    for (let i = 0; i < 3; i++) expect((await db.pool?.query(text, [i]))?.rows[0].n).toBe(i + 1);
    const texts = await prepared(db.pool as pg.Pool);
    expect(texts.filter((t) => t === text)).toHaveLength(1);
    // Kysely's queries take the same path.
    const r = await db.kysely.selectNoFrom((eb) => eb.val(41).as('v')).execute();
    expect(String(r[0]?.v)).toBe('41');
    expect((await prepared(db.pool as pg.Pool)).some((t) => t.includes('$1') && t !== text)).toBe(true);
  });

  it('texts without parameters are not prepared', async () => {
    await db.pool?.query('SELECT 2 AS unprepared');
    expect((await prepared(db.pool as pg.Pool)).some((t) => t.includes('unprepared'))).toBe(false);
  });

  it('statements whose shape follows the number of values (more than MAX_PARAMETERS) are not prepared', async () => {
    const n = MAX_PARAMETERS + 1;
    const text = `SELECT v FROM (VALUES ${Array.from({ length: n }, (_, i) => `($${i + 1}::int)`).join(', ')}) AS t(v)`;
    const r = await db.pool?.query(
      text,
      Array.from({ length: n }, (_, i) => i),
    );
    expect(r?.rows).toHaveLength(n);
    expect((await prepared(db.pool as pg.Pool)).some((t) => t === text)).toBe(false);
  });

  it('names at most the bound of distinct texts; later ones still run, unnamed', async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      namePreparedStatements(client, new StatementNames(2));
      for (let i = 0; i < 4; i++)
        expect((await client.query(`SELECT $1::int * ${i + 2} AS n`, [3])).rows[0].n).toBe(3 * (i + 2));
      expect(await prepared(client)).toHaveLength(2);
    } finally {
      await client.end();
    }
  });

  it('a statement whose result columns changed (a migration meanwhile) fails once, and its connection is replaced', async () => {
    await db.pool?.query('CREATE TABLE stmt_t (a int)');
    await db.pool?.query('INSERT INTO stmt_t VALUES ($1)', [1]);
    const text = 'SELECT * FROM stmt_t WHERE a = $1';
    expect((await db.pool?.query(text, [1]))?.rows).toEqual([{ a: 1 }]);
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    await other.query('ALTER TABLE stmt_t ADD COLUMN b int');
    await other.end();
    // Through Kysely, which hands its connection back without the error (pool.query discards a
    // connection whose statement failed by itself): the store closes it.
    await expect(sql`SELECT * FROM stmt_t WHERE a = ${1}`.execute(db.kysely)).rejects.toThrow(
      /cached plan must not change result type/,
    );
    // The pool's one connection was closed: the next one prepares the statement afresh.
    expect((await db.pool?.query(text, [1]))?.rows).toEqual([{ a: 1, b: null }]);
  });
});
