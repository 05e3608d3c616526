import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import {
  appendChanges,
  LoneWrites,
  oneChangeStatement,
  type PendingChange,
} from '../../src/store/pgwrite.js';
import { backends } from '../helpers.js';
import { createPgDatabase } from '../pg.js';

/*
 * The statement that ends every PostgreSQL write (src/store/pgwrite.ts, appendChanges): a write of
 * one change has a statement of its own, and both forms must do the same thing: take no lock
 * (writers append side by side), record the transaction's id on each change row (the log's order,
 * src/store/logposition.ts), write the object rows they carry, refuse a replace of a missing
 * object, return the transaction's id. The one-change form must also keep nothing in memory for
 * the statement (no sort, set-returning function or CTE result), which was its reason to exist.
 */

type Kind = PendingChange['object'];

let serial = 0;
const change = (object: Kind, id = `ac${process.pid}x${++serial}`): PendingChange => ({
  type: 'Group',
  id,
  data: JSON.stringify({ ID: id, Name: `n${serial}` }),
  etag: `"e${serial}"`,
  time: 1_700_000_000_000 + serial,
  object,
  createTime: 1_600_000_000_000 + serial,
  secret: object ? `{"s":${serial}}` : null,
});

describe.skipIf(!backends().includes('postgres'))('the change-log append on PostgreSQL', () => {
  let drop: () => Promise<void>;
  let db: Db;
  let watcher: pg.Client;

  beforeAll(async () => {
    let url: string;
    ({ url, drop } = await createPgDatabase('gh_append'));
    db = openDb(url);
    await migrate(db);
    watcher = new pg.Client({ connectionString: url });
    await watcher.connect();
  });
  afterAll(async () => {
    await watcher?.end();
    await db?.close();
    await drop?.();
  });

  /** Objects to replace must exist (a write reads and locks them first). */
  async function existing(n: number): Promise<PendingChange[]> {
    const made = Array.from({ length: n }, () => change('insert'));
    await db.kysely.transaction().execute((tx) => appendChanges(tx, made));
    return made.map((c) => change('replace', c.id));
  }

  /** Advisory locks held in this test's database. */
  const advisoryLocks = async () =>
    (
      await watcher.query(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      )
    ).rows[0].n as number;

  for (const size of [1, 3]) {
    for (const kind of ['insert', 'replace', undefined] as Kind[]) {
      it(`${size} change(s), ${kind ?? 'no object row'}: no lock, rows written in order with the transaction's id`, async () => {
        const changes =
          kind === 'replace' ? await existing(size) : Array.from({ length: size }, () => change(kind));
        const before = Number(
          (await watcher.query('SELECT coalesce(max(seq), 0) AS s FROM changes')).rows[0].s,
        );
        let held = -1;
        let ownXid = '';
        const xid = await db.kysely.transaction().execute(async (tx) => {
          ownXid =
            (await sql<{ x: string }>`SELECT pg_current_xact_id()::text AS x`.execute(tx)).rows[0]?.x ?? '';
          const got = await appendChanges(tx, changes);
          held = await advisoryLocks();
          return got;
        });
        expect(xid).toBe(ownXid);
        expect(held).toBe(0);

        const logged = await watcher.query(
          'SELECT seq, tx::text AS tx, type, id, data, etag, time FROM changes WHERE seq > $1 ORDER BY seq',
          [before],
        );
        expect(logged.rows.map((r) => [r.id, r.data, r.etag, Number(r.time), r.tx])).toEqual(
          changes.map((c) => [c.id, c.data, c.etag, c.time, xid]),
        );
        const objects = await watcher.query(
          'SELECT id, data, etag, modify_time, secret FROM objects WHERE type = $1 AND id = ANY($2)',
          ['Group', changes.map((c) => c.id)],
        );
        if (kind === undefined) expect(objects.rows).toEqual([]);
        else
          expect(
            new Map(objects.rows.map((r) => [r.id, [r.data, r.etag, Number(r.modify_time), r.secret]])),
          ).toEqual(new Map(changes.map((c) => [c.id, [c.data, c.etag, c.time, c.secret]])));
      });
    }

    it(`${size} change(s): a replace of a missing object fails and writes nothing`, async () => {
      const changes = [...(await existing(size - 1)), change('replace')];
      const before = Number(
        (await watcher.query('SELECT coalesce(max(seq), 0) AS s FROM changes')).rows[0].s,
      );
      await expect(db.kysely.transaction().execute((tx) => appendChanges(tx, changes))).rejects.toThrow(
        'an object to replace was not found',
      );
      expect(
        (await watcher.query('SELECT count(*)::int AS n FROM changes WHERE seq > $1', [before])).rows[0].n,
      ).toBe(0);
    });
  }

  it('the one-change statement keeps no statement-sized memory: no sort, set-returning function or CTE result', async () => {
    for (const kind of ['insert', 'replace', undefined] as Kind[]) {
      const q = oneChangeStatement(change(kind)).compile(db.kysely);
      const explained = await db.kysely.executeQuery({ ...q, sql: `EXPLAIN (COSTS OFF) ${q.sql}` });
      const plan = (explained.rows as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toMatch(/Insert on changes/);
      expect(plan).not.toMatch(/Sort|Function Scan|CTE Scan|ProjectSet|Materialize|Hash/);
    }
  });

  describe('creations with nothing to check, together (LoneWrites)', () => {
    const txOf = async (ids: string[]) =>
      (await watcher.query('SELECT id, tx::text AS tx FROM changes WHERE id = ANY($1)', [ids])).rows as {
        id: string;
        tx: string;
      }[];
    const stored = async (ids: string[]) =>
      (await watcher.query('SELECT id FROM objects WHERE id = ANY($1) ORDER BY id', [ids])).rows.map(
        (r) => r.id as string,
      );

    it('go in one statement while one is in flight, each committed when its promise settles', async () => {
      const lone = new LoneWrites(db);
      const made = Array.from({ length: 10 }, () => change('insert'));
      const ids = made.map((c) => c.id);
      await Promise.all(made.map((c) => lone.append([c])));
      const rows = await txOf(ids);
      expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
      // The first went at once, alone; the nine that came while it was in flight went together.
      expect(new Set(rows.map((r) => r.tx)).size).toBe(2);
      expect(await stored(ids)).toEqual([...ids].sort());
    });

    it('run a failed group again write by write: only the write at fault fails, with its own error', async () => {
      const lone = new LoneWrites(db);
      const taken = change('insert');
      await lone.append([taken]);
      const first = change('insert');
      const group = [change('insert'), change('insert', taken.id), change('insert')];
      const results = await Promise.allSettled([first, ...group].map((c) => lone.append([c])));
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      expect(((results[2] as PromiseRejectedResult).reason as { code?: string }).code).toBe('23505');
      const fine = [first, group[0], group[2]].map((c) => (c as PendingChange).id);
      expect(await stored(fine)).toEqual([...fine].sort());
      // The clash left the object it clashed with as it was, and logged nothing for it.
      expect((await txOf([taken.id])).length).toBe(1);
    });
  });
});
