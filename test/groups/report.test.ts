import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPORT_COLUMNS } from '../../src/groups/report.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { create, op, person } from './fixture.js';

describe.each(backends())('GET /groups/report.csv on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('lists one row per approval of every active member, quoted per RFC 4180', async () => {
    const approver = await person(s, 'Approver, "Chief"');
    const alice = await person(s, 'Alice');
    const bob = await person(s, 'Bob');
    const carol = await person(s, 'Carol');
    const dave = await person(s, 'Dave');
    const tricky = 'Ops, "prod"\nline two';
    const g = await create(s, 'groups', {
      Name: tricky,
      RequiresApproval: true,
      RequiresActivation: true,
      Approvers: [approver.id],
    });
    const open = await create(s, 'groups', { Name: 'open, simple' });
    // Alice: requested, approved, activated, used: one row.
    await op(s, 'add', g, alice.id, { key: alice.key, reason: 'needs "prod", now\r\nplease' });
    await op(s, 'approve', g, alice.id, { key: approver.key, reason: 'ok, "fine"' });
    await op(s, 'activate', g, alice.id, { key: alice.key });
    const used = await op(s, 'use', g, alice.id);
    const lastUsed = used.json().LastUsed as string;
    // Bob: approved but not activated: absent.
    await op(s, 'add', g, bob.id, { key: bob.key });
    await op(s, 'approve', g, bob.id, { key: approver.key });
    // Carol: approved, active, then rejected: absent.
    await op(s, 'add', g, carol.id, { key: carol.key });
    await op(s, 'approve', g, carol.id, { key: approver.key });
    await op(s, 'activate', g, carol.id, { key: carol.key });
    await op(s, 'reject', g, carol.id, { key: approver.key });
    // Dave joined an open group by himself: active, but nobody approved him: no row.
    await op(s, 'add', open, dave.id, { key: dave.key });
    // Added by the admin to the open group: the admin's decision is the approval.
    await op(s, 'add', open, bob.id, { reason: '=HYPERLINK("x")' });

    const res = await s.req({ method: 'GET', url: '/groups/report.csv' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv/);
    const rows: string[][] = parse(res.body, { relax_column_count: false });
    expect(rows[0]).toEqual([...REPORT_COLUMNS]);
    expect(rows[0]).toEqual([
      'group_id',
      'group_name',
      'user_id',
      'user_email',
      'last_used',
      'reason',
      'approver_user_id',
      'approver_email',
      'approved_time',
      'approved_reason',
    ]);
    const body = rows.slice(1);
    expect(body).toHaveLength(2);
    const aliceRow = body.find((r) => r[2] === alice.id)!;
    expect(aliceRow).toEqual([
      g,
      tricky,
      alice.id,
      alice.email,
      lastUsed,
      'needs "prod", now\r\nplease',
      approver.id,
      approver.email,
      expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/),
      'ok, "fine"',
    ]);
    const bobRow = body.find((r) => r[2] === bob.id)!;
    expect(bobRow.slice(0, 5)).toEqual([open, 'open, simple', bob.id, bob.email, '']);
    expect(bobRow[6]).toBe(s.adminId);
    // A value a spreadsheet would run as a formula is defused with a leading quote.
    expect(bobRow[5]).toBe(`'=HYPERLINK("x")`);
    // Records end with CRLF, as RFC 4180 says.
    expect(res.body.split('\r\n')[0]).toBe(REPORT_COLUMNS.join(','));
  });

  it('is routed before /groups/:id and readable only by audit and admin keys', async () => {
    const audit = await s.keyFor(['audit']);
    const ok = await s.req({ method: 'GET', url: '/groups/report.csv', key: audit });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['content-type']).toMatch(/^text\/csv/);
    for (const scopes of [['user'], ['sync']]) {
      const u = await person(s, 'Someone');
      const key = await s.keyFor(scopes, u.id);
      const r = await s.req({ method: 'GET', url: '/groups/report.csv', key });
      expect(r.statusCode, scopes.join()).toBe(403);
    }
    expect((await s.req({ method: 'GET', url: '/groups/report.csv', key: '' })).statusCode).toBe(401);
    // The generic get still serves real group ids.
    const g = await create(s, 'groups', { Name: 'plain' });
    expect((await s.req({ method: 'GET', url: `/groups/${g}` })).json().Name).toBe('plain');
  });
});
