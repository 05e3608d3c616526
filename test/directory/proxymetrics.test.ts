import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';
import { parseExposition, sum } from './promparse.js';

/** #16 item 5, the proxy's side: proxy.metrics serves Prometheus metrics on a listener of its own. */
describe.each(backends())('proxy Prometheus metrics on %s', (backend) => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld(backend);
  });
  afterAll(async () => w?.close());

  it('counts answered requests by method and status, with latencies, on its own listener only', async () => {
    const p = await w.proxy({ env: { SVC_PROXY_METRICS: '127.0.0.1:0' } });
    expect(p.metricsPort).toBeGreaterThan(0);
    for (let i = 0; i < 3; i++) {
      const ok = await fetch(`${p.url}/hello`, { headers: { authorization: `Bearer ${w.userKey}` } });
      expect(ok.status).toBe(200);
      await ok.arrayBuffer();
    }
    const refused = await fetch(`${p.url}/hello`, {
      headers: { accept: 'application/json' },
      redirect: 'manual',
    });
    await refused.arrayBuffer();
    // The proxied application's /metrics is the application's: the proxy's are elsewhere.
    const appMetrics = await fetch(`${p.url}/metrics`, { headers: { authorization: `Bearer ${w.userKey}` } });
    expect(appMetrics.status).toBe(200);
    expect(await appMetrics.text()).not.toContain('gatehouse_proxy_requests_total');

    const base = `http://127.0.0.1:${p.metricsPort}`;
    expect((await fetch(`${base}/other`)).status).toBe(404);
    const r = await fetch(`${base}/metrics`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const fam = parseExposition(await r.text());
    expect(fam.get('gatehouse_proxy_requests_total')?.type).toBe('counter');
    expect(
      sum(fam.get('gatehouse_proxy_requests_total'), 'gatehouse_proxy_requests_total', {
        method: 'GET',
        status: '200',
      }),
    ).toBe(4);
    expect(
      sum(fam.get('gatehouse_proxy_requests_total'), 'gatehouse_proxy_requests_total', {
        method: 'GET',
        status: String(refused.status),
      }),
    ).toBeGreaterThanOrEqual(1);
    const h = fam.get('gatehouse_proxy_request_duration_seconds');
    expect(h?.type).toBe('histogram');
    expect(
      sum(h, 'gatehouse_proxy_request_duration_seconds_count', { method: 'GET' }),
    ).toBeGreaterThanOrEqual(5);
    await p.close();
  });

  it('serves no metrics listener unless proxy.metrics is set', async () => {
    const p = await w.proxy();
    expect(p.metricsPort).toBeUndefined();
    await p.close();
  });
});
