import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AuditBatch } from '../../src/audit/trail.js';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';

type Entry = Record<string, string | number>;

/*
 * An object write's audit entry is inserted by the write's own statement (src/api/auditentry.ts,
 * src/store/auditrow.ts): committed with the write, in the same transaction, and not again by the
 * trail's batch. Answers without a write (304, 412, 404, refusals) are still recorded by the
 * batch, with the status they got.
 */
describe.each(backends())('audit entries written with the write on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  const entriesOf = async (requestId: unknown) => {
    const r = await s.req({
      method: 'GET',
      url: `/audit?filter=${encodeURIComponent(`RequestID = ${JSON.stringify(String(requestId))}`)}`,
    });
    expect(r.statusCode, r.body).toBe(200);
    return jsonLines(r.body).map((l) => l.Item as Entry);
  };

  it('records a create, an update and a delete once each, in the transaction of the write', async () => {
    const batch = vi.spyOn(AuditBatch.prototype, 'record');
    try {
      const created = await s.req({ method: 'POST', url: '/users', payload: { Name: { FullName: 'a' } } });
      expect(created.statusCode, created.body).toBe(201);
      const id = String(created.headers['x-id']);
      const updated = await s.req({
        method: 'PUT',
        url: `/users/${id}`,
        payload: { Name: { FullName: 'b' } },
        headers: { 'if-match': String(created.headers.etag) },
      });
      expect(updated.statusCode, updated.body).toBe(204);
      const deleted = await s.req({
        method: 'DELETE',
        url: `/users/${id}`,
        headers: { 'if-match': String(updated.headers.etag) },
      });
      expect(deleted.statusCode, deleted.body).toBe(204);
      // None of them went through the batch: their statements wrote the entries.
      expect(batch).not.toHaveBeenCalled();
      for (const [answer, method, status] of [
        [created, 'POST', 201],
        [updated, 'PUT', 204],
        [deleted, 'DELETE', 204],
      ] as const) {
        const entries = await entriesOf(answer.headers['x-request-id']);
        expect(entries).toHaveLength(1);
        expect(entries[0]).toMatchObject({ Method: method, Status: status, ObjectID: id, Kind: 'User' });
      }
      if (backend === 'postgres') {
        // The same transaction as the write's change: its id is on both rows.
        const entry = (await entriesOf(updated.headers['x-request-id']))[0] as Entry;
        const same = await sql<{ same: boolean }>`SELECT a.tx = c.tx AS same FROM audit_trail a, changes c
          WHERE a.id = ${String(entry.ID)} AND c.type = 'User' AND c.id = ${id} AND c.etag = ${String(updated.headers.etag)}`.execute(
          s.db.kysely,
        );
        expect(same.rows).toEqual([{ same: true }]);
      }
    } finally {
      batch.mockRestore();
    }
  });

  it('records concurrent creations once each, also when they are written by one statement', async () => {
    // On PostgreSQL creations in flight together go in one statement (LoneWrites, pgwrite.ts).
    const answers = await Promise.all(
      Array.from({ length: 24 }, () => s.req({ method: 'POST', url: '/users', payload: {} })),
    );
    for (const a of answers) {
      expect(a.statusCode).toBe(201);
      const entries = await entriesOf(a.headers['x-request-id']);
      expect(entries.map((e) => [e.Status, e.ObjectID])).toEqual([[201, a.headers['x-id']]]);
    }
  });

  it('records answers without a write through the batch, with their own status', async () => {
    const created = await s.req({ method: 'POST', url: '/users', payload: { Name: { FullName: 'c' } } });
    const id = String(created.headers['x-id']);
    const batch = vi.spyOn(AuditBatch.prototype, 'record');
    try {
      const unchanged = await s.req({
        method: 'PUT',
        url: `/users/${id}`,
        payload: { Name: { FullName: 'c' } },
        headers: { 'if-match': String(created.headers.etag) },
      });
      expect(unchanged.statusCode).toBe(304);
      const stale = await s.req({
        method: 'PUT',
        url: `/users/${id}`,
        payload: { Name: { FullName: 'd' } },
        headers: { 'if-match': '"stale"' },
      });
      expect(stale.statusCode).toBe(412);
      const missing = await s.req({
        method: 'DELETE',
        url: '/users/nosuchuser0000',
        headers: { 'if-match': '*' },
      });
      expect(missing.statusCode).toBe(404);
      expect(batch).toHaveBeenCalledTimes(3);
      for (const [answer, status] of [
        [unchanged, 304],
        [stale, 412],
        [missing, 404],
      ] as const) {
        const entries = await entriesOf(answer.headers['x-request-id']);
        expect(entries).toHaveLength(1);
        expect(entries[0]?.Status).toBe(status);
      }
    } finally {
      batch.mockRestore();
    }
  });

  it('records nothing for a write that failed, and the failure once', async () => {
    const created = await s.req({ method: 'POST', url: '/groups', payload: { Name: 'taken-name' } });
    expect(created.statusCode).toBe(201);
    const clash = await s.req({ method: 'POST', url: '/groups', payload: { Name: 'taken-name' } });
    expect(clash.statusCode).toBe(409);
    const entries = await entriesOf(clash.headers['x-request-id']);
    expect(entries.map((e) => e.Status)).toEqual([409]);
  });
});
