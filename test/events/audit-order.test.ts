import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditPosition, auditAfter, auditStart, recordAudit } from '../../src/audit/trail.js';
import { type Db, openDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { backends } from '../helpers.js';
import { createPgDatabase } from '../pg.js';

/*
 * The audit event stream reads the audit trail in order (src/audit/trail.ts, auditAfter). On
 * PostgreSQL entries come from concurrent transactions (every instance's batches, and single
 * entries beside them), and a sequence number drawn first can commit last: the stream must still
 * deliver every entry exactly once.
 */

const entry = (n: string) => ({ Route: '/audit-order', ObjectID: n });

describe.skipIf(!backends().includes('postgres'))('audit stream order on PostgreSQL', () => {
  let url = '';
  let drop: () => Promise<void>;
  let db: Db;
  const clients: pg.Client[] = [];

  beforeAll(async () => {
    ({ url, drop } = await createPgDatabase('gh_auditorder'));
    db = openDb(url);
    await migrate(db);
    for (let i = 0; i < 3; i++) {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      clients.push(c);
    }
  });
  afterAll(async () => {
    for (const c of clients) await c.end();
    await db?.close();
    await drop?.();
  });

  /** Reads everything the stream may read now, from `at`; returns the targets and the new position. */
  async function readAll(at: AuditPosition): Promise<{ got: string[]; at: AuditPosition }> {
    const got: string[] = [];
    for (;;) {
      const rows = await auditAfter(db, at, 2);
      for (const r of rows) {
        got.push((JSON.parse(r.data) as { ObjectID: string }).ObjectID);
        at = r.at;
      }
      if (rows.length < 2) return { got, at };
    }
  }

  /**
   * readAll until `n` entries came: the xmin horizon is the whole cluster's, so another test's open
   * transaction (another database, same server) can hold entries back for a moment.
   */
  async function readUntil(
    at: AuditPosition,
    n: number,
    counts: (entry: string) => boolean = () => true,
  ): Promise<{ got: string[]; at: AuditPosition }> {
    const got: string[] = [];
    const until = Date.now() + 10_000;
    for (;;) {
      const r = await readAll(at);
      got.push(...r.got);
      at = r.at;
      if (got.filter(counts).length >= n || Date.now() > until) return { got, at };
      await new Promise((res) => setTimeout(res, 20));
    }
  }

  it('an entry whose transaction commits after a later one is still delivered, once', async () => {
    let at = await auditStart(db, 0);
    const slow = clients[0] as pg.Client;
    await slow.query('BEGIN');
    // Draws its sequence number first, commits last.
    await slow.query(
      `INSERT INTO audit_trail (type, id, data, time) VALUES ('AuditEntry', 'slow-1', '{"ObjectID":"slow"}', 0)`,
    );
    await recordAudit(db, entry('fast'));
    const first = await readAll(at);
    at = first.at;
    // Held back while an older transaction may still add an entry before it.
    expect(first.got).toEqual([]);
    await slow.query('COMMIT');
    const second = await readUntil(at, 2);
    expect(second.got).toEqual(['slow', 'fast']);
    expect((await readAll(second.at)).got).toEqual([]);
  });

  it('generated: transactions inserting and committing in any order, read between any two steps, deliver every entry exactly once', async () => {
    let round = 0;
    await fc.assert(
      fc.asyncProperty(
        // Three transactions; the order of their six steps (begin+insert, commit) and where reads happen.
        fc.shuffledSubarray([0, 1, 2, 3, 4, 5], { minLength: 6, maxLength: 6 }),
        fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
        async (order, readAfter) => {
          round++;
          let at = await auditStart(db, 0);
          const seen: string[] = [];
          const inserted = new Set<number>();
          const committed = new Set<number>();
          // A transaction's commit comes after its insert: steps are taken in `order`, each
          // transaction's insert at its first step and its commit at its second.
          const steps = order.map((s) => s % 3);
          for (const [i, t] of steps.entries()) {
            const c = clients[t] as pg.Client;
            if (!inserted.has(t)) {
              inserted.add(t);
              await c.query('BEGIN');
              await c.query(
                `INSERT INTO audit_trail (type, id, data, time) VALUES ('AuditEntry', $1, $2, 0)`,
                [`r${round}-t${t}`, JSON.stringify({ ObjectID: `r${round}-t${t}` })],
              );
            } else {
              committed.add(t);
              await c.query('COMMIT');
            }
            if (readAfter[i]) {
              const r = await readAll(at);
              seen.push(...r.got);
              at = r.at;
            }
          }
          expect(committed.size).toBe(3);
          // Entries of earlier rounds (or tests) may still come through here when another
          // transaction on the server held them back: only this round's are counted.
          const mine = (e: string) => e.startsWith(`r${round}-`);
          seen.push(...(await readUntil(at, 3 - seen.filter(mine).length, mine)).got);
          expect(seen.filter(mine).sort()).toEqual([0, 1, 2].map((t) => `r${round}-t${t}`));
        },
      ),
      { numRuns: 40 },
    );
  });
});
