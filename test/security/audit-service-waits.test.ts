/**
 * Second-afternoon audit: "every wait has a bound" at the service itself, not only at the proxy
 * (finding 8 was slow bodies holding the proxy's upstream connections).
 *
 * OPEN (fix belongs in src/api/server.ts, edited by another engineer right now): Fastify's
 * default `requestTimeout` is 0, which switches off Node's request timeout, and the socket idle
 * timeout is 0 too; only the 60 s header timeout applies. A client that sends its headers and
 * then a body one byte a minute (or never) holds a connection and its request for as long as it
 * likes; many such clients exhaust sockets and memory without ever being authenticated (the
 * body is read before the route runs). Fix: pass `requestTimeout` (e.g. 30 s, the whole request
 * including its body) and `connectionTimeout` (socket idle) to Fastify in createServer, and
 * document them in docs/api.md; then turn `it.fails` into `it`.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';

describe.each(backends())('service waits have bounds on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    expect((s.app.server.address() as AddressInfo).port).toBeGreaterThan(0);
  });
  afterAll(async () => s?.close());

  it('the header wait is bounded (Node default, kept)', () => {
    const t = s.app.server.headersTimeout;
    expect(t).toBeGreaterThan(0);
    expect(t).toBeLessThanOrEqual(60_000);
  });

  // OPEN: see the file comment (a body that never finishes holds the connection without bound).
  it.fails('a request whose body never finishes is bounded as a whole, and an idle socket too', () => {
    const requestTimeout = s.app.server.requestTimeout;
    expect(requestTimeout).toBeGreaterThan(0);
    expect(requestTimeout).toBeLessThanOrEqual(120_000);
    const idle = s.app.server.timeout;
    expect(idle).toBeGreaterThan(0);
    expect(idle).toBeLessThanOrEqual(300_000);
  });
});
