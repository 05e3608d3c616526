import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KEY_CACHE_MS } from '../../src/proxy/credentials.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';
import { parseExposition, sum } from './promparse.js';

/** #16 item 5, the proxy's side: proxy.metrics serves Prometheus metrics on a listener of its own. */
describe.each(backends())('the proxy: Prometheus metrics and disabled users on %s', (backend) => {
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

  it("stops a disabled user's API key at the proxy within its documented key cache time", async () => {
    const p = await w.proxy();
    const u = await w.s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: `gone-${Date.now()}@example.com` },
    });
    const id = u.headers['x-id'] as string;
    const key = await w.s.keyFor(['user'], id);
    const get = () =>
      fetch(`${p.url}/x`, { headers: { authorization: `Bearer ${key}`, accept: 'application/json' } });
    const first = await get();
    await first.arrayBuffer();
    expect(first.status).toBe(200);
    expect((await w.s.req({ method: 'POST', url: `/users/${id}/disable` })).statusCode).toBe(200);
    // Within KEY_CACHE_MS the proxy may still answer from its cache; past it, never.
    const spy = vi.spyOn(Date, 'now').mockReturnValue(Date.now() + KEY_CACHE_MS + 1);
    try {
      const after = await get();
      await after.arrayBuffer();
      expect([401, 403]).toContain(after.status);
    } finally {
      spy.mockRestore();
      await p.close();
    }
  });
});
