import fc from 'fast-check';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditAfter } from '../../src/audit/trail.js';
import { takeSnapshot } from '../../src/events/snapshot.js';
import { type Db, openDb } from '../../src/store/db.js';
import {
  isAfter,
  LOG_START,
  type LogPosition,
  pgLogSnapshot,
  sawChange,
} from '../../src/store/logposition.js';
import { migrate } from '../../src/store/migrations.js';
import { ObjectStore } from '../../src/store/objects.js';
import { backends } from '../helpers.js';
import { createPgDatabase } from '../pg.js';

/*
 * What a subscriber's snapshot saw of the change log (src/store/logposition.ts): on PostgreSQL
 * writers commit in another order than their transaction ids, so "seen" is the snapshot's own
 * rule, not a cut-off. A change the snapshot saw and the tailer delivers later would be sent
 * twice; one it did not see and is dropped would be lost.
 */

describe('log positions', () => {
  it('orders by transaction id first, then sequence number, as PostgreSQL compares (tx, seq)', () => {
    const pos = fc.record({ tx: fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }).map(String), seq: fc.nat() });
    fc.assert(
      fc.property(pos, pos, (a: LogPosition, b: LogPosition) => {
        const [ta, tb] = [BigInt(a.tx), BigInt(b.tx)];
        const expected = ta > tb || (ta === tb && a.seq > b.seq);
        expect(isAfter(a, b)).toBe(expected);
        if (expected) expect(isAfter(b, a)).toBe(false);
      }),
    );
  });

  it('reads PostgreSQL snapshot text and refuses anything else', () => {
    const s = pgLogSnapshot('10:20:12,15');
    expect(sawChange(s, { tx: '9', seq: 1 })).toBe(true);
    expect(sawChange(s, { tx: '12', seq: 1 })).toBe(false);
    expect(sawChange(s, { tx: '13', seq: 1 })).toBe(true);
    expect(sawChange(s, { tx: '20', seq: 1 })).toBe(false);
    expect(pgLogSnapshot('10:10:')).toEqual({ xmin: 10n, xmax: 10n, running: new Set() });
    for (const bad of ['', '10:20', 'a:b:', '10:20:1;2']) expect(() => pgLogSnapshot(bad)).toThrow();
  });
});

describe.skipIf(!backends().includes('postgres'))(
  'a snapshot and the changes committed around it, on PostgreSQL',
  () => {
    let drop: () => Promise<void>;
    let db: Db;
    let url: string;

    beforeAll(async () => {
      ({ url, drop } = await createPgDatabase('gh_logpos'));
      db = openDb(url);
      await migrate(db);
    });
    afterAll(async () => {
      await db?.close();
      await drop?.();
    });

    const insertChange = async (c: pg.Client, id: string) =>
      (
        await c.query<{ tx: string; seq: string }>(
          `INSERT INTO changes (type, id, data, etag, time) VALUES ('Group', $1, '{}', '"e"', 0)
         RETURNING tx::text AS tx, seq`,
          [id],
        )
      ).rows[0] as { tx: string; seq: string };

    it('reads the log in numeric order of transaction ids, also across a change in their number of digits', async () => {
      const store = new ObjectStore(db);
      await sql`INSERT INTO changes (tx, type, id, data, etag, time) VALUES
      ('99'::xid8, 'Group', 'tx99', '{}', '"e"', 0), ('100'::xid8, 'Group', 'tx100', '{}', '"e"', 0),
      ('9'::xid8, 'Group', 'tx9', '{}', '"e"', 0)`.execute(db.kysely);
      const read = (await store.changesAfter(LOG_START, 10)).changes.map((c) => c.id);
      expect(read.slice(0, 3)).toEqual(['tx9', 'tx99', 'tx100']);
      expect((await store.changesAfter({ tx: '99', seq: 0 }, 10)).changes[0]?.id).toBe('tx99');
      await sql`INSERT INTO audit_trail (tx, type, id, data, time) VALUES
      ('99'::xid8, 'AuditEntry', 'a99', '{}', 0), ('100'::xid8, 'AuditEntry', 'a100', '{}', 0),
      ('9'::xid8, 'AuditEntry', 'a9', '{}', 0)`.execute(db.kysely);
      expect((await auditAfter(db, LOG_START, 3)).map((e) => e.id)).toEqual(['a9', 'a99', 'a100']);
      await sql`DELETE FROM changes WHERE id IN ('tx9', 'tx99', 'tx100')`.execute(db.kysely);
    });

    it('starts a reader after the mark of the pruner when that is later than the last row left', async () => {
      const store = new ObjectStore(db);
      await sql`INSERT INTO changes (tx, type, id, data, etag, time) VALUES
      ('5'::xid8, 'Group', 'kept', '{}', '"e"', 0)`.execute(db.kysely);
      const last = await store.lastPosition();
      await sql`UPDATE changes_pruned SET tx = ${last.tx}::xid8, seq = ${last.seq + 1000} WHERE id = 1`.execute(
        db.kysely,
      );
      try {
        expect(await store.lastPosition()).toEqual({ tx: last.tx, seq: last.seq + 1000 });
      } finally {
        await sql`UPDATE changes_pruned SET tx = '0', seq = 0 WHERE id = 1`.execute(db.kysely);
        await sql`DELETE FROM changes WHERE id = 'kept'`.execute(db.kysely);
      }
    });

    it('saw a change committed before it behind an older open transaction, and not that transaction’s', async () => {
      const open = new pg.Client({ connectionString: url });
      const other = new pg.Client({ connectionString: url });
      await open.connect();
      await other.connect();
      try {
        await open.query('BEGIN');
        const older = await insertChange(open, 'older-open');
        // Committed at once, with a newer transaction id than the open one.
        const newer = await insertChange(other, 'newer-committed');
        expect(BigInt(newer.tx)).toBeGreaterThan(BigInt(older.tx));
        const snap = await takeSnapshot(db, 'Group');
        await open.query('COMMIT');
        const afterwards = await insertChange(other, 'after-snapshot');
        // Newer than the snapshot's xmin, yet committed before it: seen (a cut-off at xmin would send it twice).
        expect(sawChange(snap.saw, { tx: newer.tx, seq: Number(newer.seq) })).toBe(true);
        // Older, but still running when the snapshot was taken: not seen (a cut-off at xmax would lose it).
        expect(sawChange(snap.saw, { tx: older.tx, seq: Number(older.seq) })).toBe(false);
        expect(sawChange(snap.saw, { tx: afterwards.tx, seq: Number(afterwards.seq) })).toBe(false);
      } finally {
        await open.query('ROLLBACK').catch(() => {});
        await open.end();
        await other.end();
      }
    });
  },
);
