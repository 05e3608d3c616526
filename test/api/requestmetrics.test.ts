import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LATENCY_BUCKETS, RequestMetrics } from '../../src/metrics/requests.js';

/** The same two metrics as prom-client's own classes: what RequestMetrics must expose exactly. */
function reference() {
  const registry = new Registry();
  const requests = new Counter({
    name: 'gatehouse_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'gatehouse_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [...LATENCY_BUCKETS],
    registers: [registry],
  });
  return {
    registry,
    observe(method: string, route: string, status: number, seconds: number) {
      requests.inc({ method, route, status: String(status) });
      latency.observe({ method, route }, seconds);
    },
  };
}

const observation = fc.record({
  method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'HEAD'),
  // Route patterns, and values that need escaping in the exposition.
  route: fc.oneof(
    fc.constantFrom('/users/:id', '/users', '(no route)', '/auth/password'),
    fc.string({ maxLength: 12 }),
  ),
  status: fc.constantFrom(200, 201, 204, 304, 400, 401, 403, 404, 412, 429, 500, 503),
  // Bounds themselves (a value equal to a bound is in that bucket), around them, and far outside.
  seconds: fc.oneof(
    fc.constantFrom(0, ...LATENCY_BUCKETS, 5.000001, 1e6),
    fc.double({ min: 0, max: 10, noNaN: true }),
  ),
});

describe('request metrics', () => {
  it('expose exactly what prom-client Counter and Histogram expose for the same observations', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { maxLength: 60 }), async (list) => {
        const ref = reference();
        const registry = new Registry();
        const ours = new RequestMetrics(registry);
        for (const o of list) {
          ref.observe(o.method, o.route, o.status, o.seconds);
          ours.observe(o.method, o.route, o.status, o.seconds);
        }
        expect(await registry.metrics()).toBe(await ref.registry.metrics());
        expect(await registry.getMetricsAsJSON()).toEqual(await ref.registry.getMetricsAsJSON());
      }),
      { numRuns: 300 },
    );
  });

  it('count a request whose duration is not a number without recording a latency', async () => {
    const registry = new Registry();
    const ours = new RequestMetrics(registry);
    ours.observe('GET', '/users', 200, Number.NaN);
    const text = await registry.metrics();
    expect(text).toContain('gatehouse_http_requests_total{method="GET",route="/users",status="200"} 1');
    expect(text).not.toContain('gatehouse_http_request_duration_seconds_count');
  });
});
