/**
 * `Expect: 100-continue` asks the server whether to send the body. Node's server answered
 * `100 Continue` by itself before the proxy had authenticated anyone, inviting the body of a
 * request about to be refused. The proxy says Continue only when it forwards the request (or
 * reads the body itself, for an access check); a refused request gets its refusal instead, and a
 * client that waits for the 100 sends no body at all.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProxy } from '../../src/proxy/run.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';
import { finalResponses, RawConnection } from './raw.js';

describe.each(backends())('Expect: 100-continue at the proxy on %s', (backend) => {
  let w: World;
  let p: RunningProxy;
  let port: number;
  beforeAll(async () => {
    w = await startWorld(backend);
    p = await w.proxy();
    port = Number(new URL(p.url).port);
  });
  afterAll(async () => w?.close());

  const head = (path: string, extra = '') =>
    `POST ${path} HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n${extra}\r\n`;

  it.each([
    ['no credentials', ''],
    ['an unknown key', `Authorization: Bearer gv${'x'.repeat(54)}\r\n`],
  ])('a request refused for %s gets its refusal, never a 100 Continue first', async (_why, auth) => {
    const c = new RawConnection(port);
    await c.write(head('/app/upload', auth));
    const got = await c.until((r) => finalResponses(r).length > 0);
    c.close();
    expect(got).not.toMatch(/^HTTP\/1\.1 100/);
    expect(finalResponses(got)[0]?.status).toBe(401);
  });

  it('a request the proxy forwards gets 100 Continue, then its body reaches the upstream', async () => {
    const c = new RawConnection(port);
    await c.write(head('/app/upload', `Authorization: Bearer ${w.userKey}\r\n`));
    const first = await c.until((r) => r.includes('\r\n\r\n'));
    expect(first).toMatch(/^HTTP\/1\.1 100 Continue\r\n/);
    await c.write('hello');
    const got = await c.until((r) => finalResponses(r).length > 0);
    c.close();
    const answer = finalResponses(got)[0];
    expect(answer?.status).toBe(200);
    const echoed = JSON.parse(answer?.body ?? '{}') as { size: number; headers: Record<string, string> };
    expect(echoed.size).toBe(5);
    // The proxy answered the expectation itself: the upstream does not see it.
    expect(echoed.headers.expect).toBeUndefined();
  });
});
