/**
 * Finding 15: POST /auth/email answers whether an address has an account (the spec requires
 * Account Missing), and nothing limited how fast it could be asked. Every e-mail lookup now takes
 * a request from a per-address bucket (src/auth/ratelimit.ts, docs/signin.md): found and missing
 * addresses alike, through /auth/email or the `email` field of any factor step.
 */
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { EMAIL_LOOKUP, rateSource } from '../../src/auth/ratelimit.js';
import { makeUser } from '../auth/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';

const N = EMAIL_LOOKUP.burst;
const PW = 'correct horse battery staple';

describe.each(backends())('e-mail lookups are rate-limited per address on %s', (backend) => {
  let s: TestService;
  let proxied: TestService;
  let ipCounter = 0;
  /** A fresh client address (a fresh bucket) for each test. */
  const freshIp = () => `198.51.${Math.floor(++ipCounter / 250)}.${(ipCounter % 250) + 1}`;

  beforeAll(async () => {
    s = await startTestService(backend);
    await makeUser(s, { email: 'known@example.com', password: PW });
    proxied = await startTestService(backend, { SVC_SERVER_TRUSTPROXY: '10.0.0.0/8' });
    await makeUser(proxied, { email: 'known@example.com' });
  });
  afterAll(async () => {
    await s?.close();
    await proxied?.close();
  });
  afterEach(() => vi.restoreAllMocks());

  const ask = (
    svc: TestService,
    email: string,
    ip: string,
    o: { url?: string; headers?: Record<string, string>; form?: Record<string, string> } = {},
  ): Promise<LightMyRequestResponse> =>
    svc.app.inject({
      method: 'POST',
      url: o.url ?? '/auth/email',
      remoteAddress: ip,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-requested-with': 'gatehouse',
        ...(o.headers ?? {}),
      },
      payload: new URLSearchParams({ email, ...(o.form ?? {}) }).toString(),
    });

  const expectLimited = (res: LightMyRequestResponse) => {
    expect(res.statusCode, res.body).toBe(429);
    expect(res.headers['x-error-code']).toBe('Too Many Requests');
    const next = Date.parse(String(res.headers['x-next-attempt']));
    expect(next).toBeGreaterThan(Date.now() - 1000);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    return next;
  };

  it(`${N} lookups pass, found or missing; the next is 429 with X-Next-Attempt, found or missing`, async () => {
    const ip = freshIp();
    for (let i = 0; i < N; i++) {
      const res = await ask(s, i % 2 ? 'known@example.com' : `nobody${i}@example.com`, ip);
      expect(res.statusCode, res.body).toBe(i % 2 ? 204 : 400);
    }
    expectLimited(await ask(s, 'known@example.com', ip));
    expectLimited(await ask(s, 'nobody@example.com', ip));
    // Another address is not affected.
    expect((await ask(s, 'known@example.com', freshIp())).statusCode).toBe(204);
  });

  it('the limit is the same whatever is asked: generated mixes of found and missing spellings', async () => {
    const spelling = fc.oneof(
      fc.constantFrom('known@example.com', ' KNOWN@example.com ', 'Known@Example.COM'),
      fc.emailAddress(),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(spelling, { minLength: N + 1, maxLength: N + 1 }), async (emails) => {
        const ip = freshIp();
        const statuses: number[] = [];
        for (const e of emails) statuses.push((await ask(s, e, ip)).statusCode);
        // Only the count decides: the first N answer (204 or 400), the next is refused.
        expect(statuses.slice(0, N).every((st) => st !== 429)).toBe(true);
        expect(statuses[N]).toBe(429);
      }),
      { numRuns: 5 },
    );
  });

  it('parallel lookups cannot overdraw the bucket', async () => {
    const ip = freshIp();
    const all = await Promise.all(Array.from({ length: N + 10 }, (_, i) => ask(s, `p${i}@example.com`, ip)));
    expect(all.filter((r) => r.statusCode !== 429)).toHaveLength(N);
  });

  it('the email field of a factor step counts too (another way to ask)', async () => {
    const ip = freshIp();
    for (let i = 0; i < N; i++) await ask(s, `n${i}@example.com`, ip);
    expectLimited(await ask(s, 'known@example.com', ip, { url: '/auth/password', form: { password: PW } }));
    // And the other way round: the factor step's lookups use up /auth/email's bucket.
    const ip2 = freshIp();
    for (let i = 0; i < N; i++)
      await ask(s, `m${i}@example.com`, ip2, { url: '/auth/password', form: { password: 'wrong one!' } });
    expectLimited(await ask(s, 'known@example.com', ip2));
  });

  it('one request more every interval; at X-Next-Attempt the client is let in', async () => {
    const ip = freshIp();
    for (let i = 0; i < N; i++) await ask(s, `w${i}@example.com`, ip);
    const next = expectLimited(await ask(s, 'known@example.com', ip));
    const now = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(Math.max(next, now));
    expect((await ask(s, 'known@example.com', ip)).statusCode).toBe(204);
    expectLimited(await ask(s, 'known@example.com', ip));
    vi.spyOn(Date, 'now').mockReturnValue(Math.max(next, now) + 3 * EMAIL_LOOKUP.intervalMs);
    for (let i = 0; i < 3; i++) expect((await ask(s, 'known@example.com', ip)).statusCode).toBe(204);
    expectLimited(await ask(s, 'known@example.com', ip));
  });

  it('X-Forwarded-For is believed only from a trusted proxy: spoofed values share the sender’s bucket', async () => {
    const sender = '192.0.2.77';
    await fc.assert(
      fc.asyncProperty(fc.array(fc.ipV4(), { minLength: N + 1, maxLength: N + 1 }), async (spoofed) => {
        const statuses: number[] = [];
        for (const xff of spoofed)
          statuses.push(
            (await ask(proxied, 'x@example.com', sender, { headers: { 'x-forwarded-for': xff } })).statusCode,
          );
        expect(statuses).toContain(429);
      }),
      { numRuns: 1 },
    );
    // Through the trusted proxy (10.x), each client has its own bucket.
    const proxy = '10.1.2.3';
    for (let i = 0; i < N; i++)
      await ask(proxied, 'x@example.com', proxy, { headers: { 'x-forwarded-for': '203.0.113.1' } });
    expectLimited(
      await ask(proxied, 'x@example.com', proxy, { headers: { 'x-forwarded-for': '203.0.113.1' } }),
    );
    const other = await ask(proxied, 'known@example.com', proxy, {
      headers: { 'x-forwarded-for': '203.0.113.2' },
    });
    expect(other.statusCode, other.body).toBe(204);
  });

  it('IPv6 addresses of one /64 share a bucket (one host can hold a whole /64)', async () => {
    const net = '2001:db8:77:1';
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 4, maxLength: 4 }), {
          minLength: N + 1,
          maxLength: N + 1,
        }),
        async (hosts) => {
          const statuses: number[] = [];
          for (const h of hosts)
            statuses.push(
              (await ask(s, 'x@example.com', `${net}:${h.map((x) => x.toString(16)).join(':')}`)).statusCode,
            );
          expect(statuses[N]).toBe(429);
        },
      ),
      { numRuns: 1 },
    );
  });
});

describe('rateSource', () => {
  it('keys IPv6 by /64 in every spelling, IPv4 and mapped IPv4 by the address', () => {
    expect(rateSource('192.0.2.1')).toBe('192.0.2.1');
    expect(rateSource('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(rateSource('2001:db8::1')).toBe(rateSource('2001:0db8:0000:0000:ffff:1:2:3'));
    expect(rateSource('2001:DB8:0:0::1')).toBe('2001:db8:0:0::/64');
    expect(rateSource('::1')).toBe('0:0:0:0::/64');
    expect(rateSource('2001:db8:1::1')).not.toBe(rateSource('2001:db8:2::1'));
    fc.assert(
      fc.property(fc.ipV6(), (ip) => {
        expect(rateSource(ip)).toMatch(/^([0-9a-f]{1,4}:){4}:\/64$|^\d+\.\d+\.\d+\.\d+$/);
      }),
    );
  });
});
