import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_INSERTS_IN_FLIGHT, AuditBatch } from '../../src/audit/trail.js';
import type { Db } from '../../src/store/db.js';
import { backends, freshStore } from '../helpers.js';

/*
 * The audit trail's group commit (AuditBatch): entries recorded together share INSERTs, every
 * caller's promise settles only once its own entry is stored, and none is lost or doubled.
 */
describe.each(backends())('audit trail group commit on %s', (backend) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await freshStore(backend));
  });
  afterAll(async () => {
    await cleanup?.();
  });

  it('stores every entry once, in fewer statements than entries, each visible when its promise settles', async () => {
    const auditEvents = new EventEmitter(); // the service's audit bus
    const trail = new AuditBatch(db, auditEvents);
    let batches = 0;
    const count = () => batches++;
    auditEvents.on('recorded', count);
    try {
      const ids = await Promise.all(
        Array.from({ length: 300 }, async (_, i) => {
          const id = await trail.record({ Method: 'POST', Path: `/batch/${i}` });
          // Visible at once: the caller's answer may list it.
          const row = await sql<{ id: string }>`SELECT id FROM audit_trail WHERE id = ${id}`.execute(
            db.kysely,
          );
          expect(row.rows).toHaveLength(1);
          return id;
        }),
      );
      expect(new Set(ids).size).toBe(300);
      const rows = await sql<{
        n: number | string;
      }>`SELECT count(*) AS n FROM audit_trail WHERE data LIKE ${'%/batch/%'}`.execute(db.kysely);
      expect(Number(rows.rows[0]?.n)).toBe(300);
      expect(batches).toBeGreaterThanOrEqual(2); // at most 200 a statement
      expect(batches).toBeLessThan(300);
    } finally {
      auditEvents.off('recorded', count);
    }
  });

  it('entries of requests answered in the same turn of the event loop share INSERTs', async () => {
    // A server answers requests one callback after another: each entry comes after the last
    // one's promise steps, not in one synchronous burst. On SQLite, where an INSERT is never in
    // flight, they go together; on PostgreSQL the first AUDIT_INSERTS_IN_FLIGHT go at once, each
    // alone, and the rest gather while they are in flight (a round trip takes more than a few
    // promise steps).
    const auditEvents = new EventEmitter();
    const trail = new AuditBatch(db, auditEvents);
    let batches = 0;
    const count = () => batches++;
    auditEvents.on('recorded', count);
    try {
      const entries: Promise<string>[] = [];
      for (let i = 0; i < 12; i++) {
        entries.push(trail.record({ Method: 'POST', Path: `/turn/${i}` }));
        for (let step = 0; step < 10; step++) await Promise.resolve();
      }
      expect(new Set(await Promise.all(entries)).size).toBe(12);
      const together = backend === 'sqlite' ? 1 : AUDIT_INSERTS_IN_FLIGHT + 1;
      expect(batches).toBe(together);
      // A later turn's entry is a statement of its own, stored as well.
      await new Promise((r) => setImmediate(r));
      await trail.record({ Method: 'POST', Path: '/turn/next' });
      expect(batches).toBe(together + 1);
    } finally {
      auditEvents.off('recorded', count);
    }
  });

  it('a failed INSERT fails exactly the callers in it, and the next entries are stored', async () => {
    const trail = new AuditBatch(db);
    await sql`ALTER TABLE audit_trail RENAME TO audit_trail_away`.execute(db.kysely);
    const failed = await Promise.allSettled([
      trail.record({ Path: '/lost/1' }),
      trail.record({ Path: '/lost/2' }),
    ]);
    await sql`ALTER TABLE audit_trail_away RENAME TO audit_trail`.execute(db.kysely);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    const id = await trail.record({ Path: '/after' });
    expect(id).toMatch(/^[a-z0-9]{20}$/);
  });
});

describe.each(backends().filter((b) => b === 'postgres'))('audit inserts in flight on %s', (backend) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await freshStore(backend));
  });
  afterAll(async () => {
    await cleanup?.();
  });

  it(`runs up to ${AUDIT_INSERTS_IN_FLIGHT} inserts at once, never more, and the rest together after`, async () => {
    const pool = db.pool;
    if (!pool) throw new Error('a PostgreSQL store without its pool');
    // Another session holds the table: every INSERT waits on its lock, where it can be counted.
    const blocker = await pool.connect();
    const waiting = async () =>
      Number(
        (
          await pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO audit_trail%'`,
          )
        ).rows[0]?.n,
      );
    const trail = new AuditBatch(db);
    let entries: Promise<string>[] = [];
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE audit_trail IN EXCLUSIVE MODE');
      entries = Array.from({ length: 10 }, (_, i) => trail.record({ Path: `/held/${i}` }));
      const until = Date.now() + 5000;
      while ((await waiting()) < AUDIT_INSERTS_IN_FLIGHT && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      expect(await waiting()).toBe(AUDIT_INSERTS_IN_FLIGHT);
    } finally {
      await blocker.query('COMMIT');
      blocker.release();
    }
    expect(new Set(await Promise.all(entries)).size).toBe(10);
    const rows = await pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM audit_trail WHERE data LIKE '%/held/%'",
    );
    expect(Number(rows.rows[0]?.n)).toBe(10);
  });
});
