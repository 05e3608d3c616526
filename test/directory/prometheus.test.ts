import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectFigures } from '../../src/metrics/figures.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, attempts, Browser, freshIp, signIn } from '../kit/index.js';
import { addMember, setTenant, world } from './fixture.js';
import { parseExposition, type Sample, sum } from './promparse.js';

describe.each(backends())('metrics on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('exposes requests, latencies, sign-ins per factor and the directory figures to Prometheus', async () => {
    const a = await account(s, { tag: 'prom' });
    await signIn(s, a, { password: true });
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/email', { email: a.email })).statusCode).toBe(204);
    expect(await attempts(b, '/auth/password', { password: 'wrong wrong wrong' }, 2)).toEqual([403, 403]);
    const w = await world(s);
    await setTenant(s, { AccountChangesNeedApproval: true });
    await addMember(s, w.groupId, w.userId);
    await s.req({ method: 'POST', url: `/users/${w.userId}/accounts/suggest`, payload: { Plan: {} } });
    await setTenant(s, { AccountChangesNeedApproval: false });
    for (let i = 0; i < 3; i++) await s.req({ method: 'GET', url: `/users/${a.id}` });

    // Not for everyone, and not the Metric collection.
    expect((await s.req({ method: 'GET', url: '/prometheus', key: '' })).statusCode).toBe(401);
    expect(
      (await s.req({ method: 'GET', url: '/prometheus', key: await s.keyFor(['user'], a.id) })).statusCode,
    ).toBe(403);
    const r = await s.req({ method: 'GET', url: '/prometheus', key: await s.keyFor(['audit']) });
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const fam = parseExposition(r.body);

    expect(fam.get('gatehouse_http_requests_total')?.type).toBe('counter');
    expect(
      sum(fam.get('gatehouse_http_requests_total'), 'gatehouse_http_requests_total', {
        method: 'GET',
        route: '/users/:id',
        status: '200',
      }),
    ).toBeGreaterThanOrEqual(3);
    // Routes are patterns: no user ID becomes a label value.
    expect(r.body).not.toContain(a.id);
    const h = fam.get('gatehouse_http_request_duration_seconds');
    expect(h?.type).toBe('histogram');
    const buckets = (h?.samples ?? []).filter(
      (x) => x.name.endsWith('_bucket') && x.labels.route === '/users/:id' && x.labels.method === 'GET',
    );
    for (let i = 1; i < buckets.length; i++)
      expect((buckets[i] as Sample).value).toBeGreaterThanOrEqual((buckets[i - 1] as Sample).value);
    expect(buckets.at(-1)?.labels.le).toBe('+Inf');
    expect(
      sum(h, 'gatehouse_http_request_duration_seconds_count', { method: 'GET', route: '/users/:id' }),
    ).toBe(buckets.at(-1)?.value);

    const signins = fam.get('gatehouse_signins_total');
    expect(sum(signins, 'gatehouse_signins_total', { factor: 'password', result: 'success' })).toBe(1);
    expect(sum(signins, 'gatehouse_signins_total', { factor: 'password', result: 'failure' })).toBe(2);
    expect(
      sum(fam.get('gatehouse_users_active_day'), 'gatehouse_users_active_day', {}),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sum(
        fam.get('gatehouse_approvals_pending_accountchanges'),
        'gatehouse_approvals_pending_accountchanges',
        {},
      ),
    ).toBe(1);
    expect(
      sum(
        fam.get('gatehouse_approvals_pending_accountchangeplans'),
        'gatehouse_approvals_pending_accountchangeplans',
        {},
      ),
    ).toBe(1);

    // The same figures as Metric objects.
    await collectFigures(s);
    const metric = async (id: string) => (await s.req({ method: 'GET', url: `/metrics/${id}` })).json().Value;
    expect(await metric('signins.password.success')).toBe(1);
    expect(await metric('signins.password.failure')).toBe(2);
    expect(await metric('approvals.pending.accountchanges')).toBe(1);
    expect(await metric('users.active.day')).toBeGreaterThanOrEqual(1);
    // A second collection adds only what happened since.
    await collectFigures(s);
    expect(await metric('signins.password.failure')).toBe(2);
  });
});
