import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneAuditBatch, recordAudit } from '../../src/audit/trail.js';
import { loadServiceConfig } from '../../src/config/index.js';
import { startPruner } from '../../src/store/changelog.js';
import type { Db } from '../../src/store/db.js';
import { backends, freshStore } from '../helpers.js';

/* The audit trail's own retention (server.auditretention): old entries go, in batches, oldest first. */

describe.each(backends())('audit trail retention on %s', (backend) => {
  let db: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ db, cleanup } = await freshStore(backend));
  });
  afterAll(async () => {
    await cleanup?.();
  });

  const times = async () =>
    (
      await sql<{ time: string | number }>`SELECT time FROM audit_trail ORDER BY seq`.execute(db.kysely)
    ).rows.map((r) => Number(r.time));

  it('deletes exactly the entries older than the retention, a batch at a time', async () => {
    const now = Date.now();
    const day = 86_400_000;
    for (let i = 0; i < 25; i++)
      await recordAudit(db, { Method: 'POST', Path: `/old/${i}` }, now - 500 * day + i);
    for (let i = 0; i < 5; i++) await recordAudit(db, { Method: 'POST', Path: `/new/${i}` }, now - i * day);
    const pruner = startPruner(db, {
      retentionMs: 400 * day,
      intervalMs: 3_600_000,
      batch: 7,
      prune: pruneAuditBatch,
    });
    expect(await pruner.runOnce()).toBe(25);
    await pruner.stop();
    const left = await times();
    expect(left.length).toBe(5);
    expect(left.every((t) => t > now - 400 * day)).toBe(true);
    // One batch deletes at most its size.
    for (let i = 0; i < 3; i++) await recordAudit(db, { Method: 'PUT', Path: '/older' }, now - 900 * day);
    expect(await pruneAuditBatch(db, now - 400 * day, 2)).toBe(2);
    expect(await pruneAuditBatch(db, now - 400 * day, 2)).toBe(1);
    expect(await pruneAuditBatch(db, now - 400 * day, 2)).toBe(0);
  });

  it('the setting: 400 days by default, 0 keeps everything, no negative values', () => {
    expect(loadServiceConfig({ env: {} }).server.auditretention).toBe(400 * 86_400);
    expect(loadServiceConfig({ env: { SVC_SERVER_AUDITRETENTION: '0' } }).server.auditretention).toBe(0);
    expect(() => loadServiceConfig({ env: { SVC_SERVER_AUDITRETENTION: '-5' } })).toThrow(/at least 0/);
  });
});
