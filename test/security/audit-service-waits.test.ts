/**
 * "Every wait has a bound" at the service itself, not only at the proxy (finding 8 was slow
 * bodies holding the proxy's upstream connections). Fastify's defaults switch Node's request
 * timeout and the socket idle timeout off: a client that sent its headers and then a body one
 * byte a minute, or never, held a connection and its request for as long as it liked, before any
 * authentication (the body is read before the route runs).
 */
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { IDLE_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from '../../src/api/server.js';
import { backends, startTestService, type TestService } from '../helpers.js';

describe.each(backends())('service waits have bounds on %s', (backend) => {
  let s: TestService;
  let quick: TestService;
  const IDLE = 400;
  beforeAll(async () => {
    s = await startTestService(backend);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    quick = await startTestService(backend, {}, { idleTimeoutMs: IDLE });
    await quick.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await s?.close();
    await quick?.close();
  });

  it('the header wait, the whole request and an idle connection are bounded by default', () => {
    expect(s.app.server.headersTimeout).toBeGreaterThan(0);
    expect(s.app.server.headersTimeout).toBeLessThanOrEqual(60_000);
    expect(s.app.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
    expect(REQUEST_TIMEOUT_MS).toBeLessThanOrEqual(120_000);
    expect(s.app.server.timeout).toBe(IDLE_TIMEOUT_MS);
    expect(IDLE_TIMEOUT_MS).toBeLessThanOrEqual(300_000);
  });

  it('a body that stalls is cut off after the idle bound, before any route runs', async () => {
    const port = (quick.app.server.address() as AddressInfo).port;
    const sock = net.connect(port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    let answer = '';
    sock.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
    });
    sock.on('error', () => undefined);
    const started = Date.now();
    sock.write(
      `POST /users HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${quick.adminKey}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"Email":',
    );
    await new Promise((r) => sock.once('close', r));
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(IDLE - 50);
    expect(took).toBeLessThan(IDLE + 3000);
    // No user was created from the half body.
    const users = await quick.req({ url: '/users' });
    expect(users.body.split('\n').filter(Boolean)).toHaveLength(1);
    expect(answer).not.toContain('201');
  });

  it('an event stream outlives the idle bound (the websocket takes the socket off the timer)', async () => {
    const port = (quick.app.server.address() as AddressInfo).port;
    const ws = new WebSocket(`ws://127.0.0.1:${port}/events`, {
      headers: { authorization: `Bearer ${quick.adminKey}` },
    });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    await new Promise((r) => setTimeout(r, IDLE * 3));
    expect(ws.readyState).toBe(WebSocket.OPEN);
    const frame = new Promise<string>((r) => ws.once('message', (m) => r(m.toString())));
    ws.send(JSON.stringify({ Kind: 'Tenant' }));
    expect(await frame).toContain('Tenant');
    ws.close();
  });
});
