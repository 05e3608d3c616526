import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holdsSecret } from '../../src/core/redact.js';
import { REQUEST_ID_PATTERN, requestIdSource } from '../../src/core/requestid.js';
import { backends, startTestService, type TestService } from '../helpers.js';

describe('request ids', () => {
  it('are unique within a server and across servers, in the echoed form, never key-shaped', () => {
    const a = requestIdSource();
    const b = requestIdSource();
    const seen = new Set<string>();
    for (let i = 0; i < 50_000; i++) {
      for (const id of [a(), b()]) {
        expect(seen.has(id)).toBe(false);
        seen.add(id);
      }
    }
    for (const id of [...seen].slice(-1000)) {
      expect(id).toMatch(REQUEST_ID_PATTERN);
      expect(holdsSecret(id, false)).toBe(false);
    }
  });

  it('two sources never share a prefix (72 random bits each)', () => {
    const prefixes = new Set(Array.from({ length: 2000 }, () => requestIdSource()().split('.')[0]));
    expect(prefixes.size).toBe(2000);
  });

  it('the pattern refuses anything but a short token of safe characters', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (s) => {
        const ok = REQUEST_ID_PATTERN.test(s);
        expect(ok).toBe(s.length >= 1 && s.length <= 64 && /^[A-Za-z0-9._-]*$/.test(s));
      }),
    );
  });
});

describe.each(backends())('X-Request-Id on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('a new one per request unless the client sends a valid one; a key-shaped one is replaced', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const res = await s.req({ method: 'GET', url: '/users' });
      ids.add(String(res.headers['x-request-id']));
    }
    expect(ids.size).toBe(20);
    const mine = await s.req({ method: 'GET', url: '/users', headers: { 'x-request-id': 'trace-42.a_b' } });
    expect(mine.headers['x-request-id']).toBe('trace-42.a_b');
    const key = `gv${'A'.repeat(54)}`;
    const keyShaped = await s.req({ method: 'GET', url: '/users', headers: { 'x-request-id': key } });
    expect(keyShaped.headers['x-request-id']).not.toBe(key);
    expect(String(keyShaped.headers['x-request-id'])).toMatch(REQUEST_ID_PATTERN);
    const bad = await s.req({ method: 'GET', url: '/users', headers: { 'x-request-id': 'a b' } });
    expect(bad.headers['x-request-id']).not.toBe('a b');
  });
});
