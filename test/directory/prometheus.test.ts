import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectFigures } from '../../src/metrics/figures.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, attempts, Browser, freshIp, signIn } from '../kit/index.js';
import { addMember, setTenant, world } from './fixture.js';

/**
 * A parser of the Prometheus text exposition format (version 0.0.4), written from the format's
 * description and independent of prom-client: families from # HELP / # TYPE, samples with
 * escaped label values, floats including +Inf and NaN. It throws on anything malformed.
 */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
interface Family {
  type: string;
  help: string;
  samples: Sample[];
}
function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  const familyOf = (sample: string) => {
    for (const suffix of ['_bucket', '_sum', '_count', '']) {
      if (!sample.endsWith(suffix)) continue;
      const base = sample.slice(0, sample.length - suffix.length);
      const f = families.get(base);
      if (f && (suffix === '' || f.type === 'histogram' || f.type === 'summary')) return f;
    }
    throw new Error(`sample ${sample} has no # TYPE`);
  };
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`).exec(line);
    if (m) {
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      const f = families.get(name) ?? { type: 'untyped', help: '', samples: [] };
      if (kind === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest))
          throw new Error(`bad type ${rest}`);
        f.type = rest;
      } else f.help = rest;
      families.set(name, f);
      continue;
    }
    if (line.startsWith('#')) continue;
    m = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`).exec(line);
    if (!m) throw new Error(`malformed sample line: ${line}`);
    const [, name, labelText, valueText] = m as unknown as [string, string, string | undefined, string];
    const labels: Record<string, string> = {};
    let rest = labelText ?? '';
    while (rest !== '') {
      const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/.exec(rest);
      if (!lm) throw new Error(`malformed labels: ${labelText}`);
      labels[lm[1] as string] = (lm[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      rest = rest.slice(lm[0].length);
    }
    const value =
      valueText === '+Inf'
        ? Infinity
        : valueText === '-Inf'
          ? -Infinity
          : valueText === 'NaN'
            ? NaN
            : Number(valueText);
    if (Number.isNaN(value) && valueText !== 'NaN') throw new Error(`bad value ${valueText}`);
    familyOf(name).samples.push({ name, labels, value });
  }
  return families;
}

const sum = (f: Family | undefined, name: string, match: Record<string, string>) =>
  (f?.samples ?? [])
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);

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
