/**
 * Finding 11: an API key in the URL reached the log when its parameter name was encoded
 * (`access%5Ftoken=<key>`): redaction matched the raw text while the query parser decodes it.
 * Redaction now works on the parsed form (src/core/redact.ts); these tests generate encodings of
 * the name and of the secret and look for the secret in every decoding of what was logged.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/core/redact.js';
import { generateApiKey } from '../../src/objects/apikey.js';
import { redact } from '../../src/proxy/http.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';

const hex = (c: string, upper: boolean) => {
  const h = c.charCodeAt(0).toString(16).padStart(2, '0');
  return `%${upper ? h.toUpperCase() : h.toLowerCase()}`;
};

/** How one character is written: as itself, percent-encoded (either hex case), or encoded twice. */
const charStyle = fc.constantFrom('raw', 'raw', 'upper', 'lower', 'double');
const writeChar = (c: string, style: string) =>
  style === 'raw' ? c : style === 'double' ? `%25${hex(c, true).slice(1)}` : hex(c, style === 'upper');

/** A string with any subset of its characters encoded, in any of the styles. */
const encoded = (s: string) =>
  fc
    .array(charStyle, { minLength: s.length, maxLength: s.length })
    .map((styles) => [...s].map((c, i) => writeChar(c, styles[i] as string)).join(''));

/** Spellings of the parameter name: encoded characters, and letter case (which we redact too). */
const paramName = fc
  .tuple(fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }), fc.boolean())
  .map(([up, fold]) => [...'access_token'].map((c, i) => (fold && up[i] ? c.toUpperCase() : c)).join(''))
  .chain(encoded);

const base62 = fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789');
const apiKey = fc.array(base62, { minLength: 54, maxLength: 54 }).map((cs) => `gv${cs.join('')}`);
const proxyToken = fc
  .tuple(
    fc.array(fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'), { minLength: 1, maxLength: 14 }),
    fc.array(fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'), {
      minLength: 43,
      maxLength: 43,
    }),
  )
  .map(([id, sig]) => `gp.${id.join('')}.${sig.join('')}`);

/** A secret and one way of writing it in a URL. */
const secretWritten = fc
  .oneof(apiKey, proxyToken)
  .chain((secret) => encoded(secret).map((value) => ({ secret, value })));

/** Ordinary parameters around the secret, '+' and escapes included. */
const otherParam = fc.constantFrom(
  'limit=10',
  'filter=Name+%3D+%22ops%22',
  'order=-Email',
  'q=a+b',
  'x',
  'y=',
);

/** Every reading a log reader (or a tool) might give a log line: raw, '+' as space, decoded once and twice. */
function decodings(text: string): string[] {
  const loose = (s: string) =>
    s.replace(/%([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
  const once = loose(text);
  return [text, text.replace(/\+/g, ' '), once, loose(once), loose(loose(once))];
}
const leaks = (text: string, secret: string) => decodings(text).some((d) => d.includes(secret));

describe('redactUrl: the parsed query, every encoding', () => {
  it('never leaves an API key or proxy token in any decoding, whatever the name or encoding', () => {
    fc.assert(
      fc.property(
        secretWritten,
        fc.oneof(paramName, encoded('token'), encoded('next'), fc.constant('a')),
        fc.array(otherParam, { maxLength: 3 }),
        fc.nat(3),
        ({ secret, value }, name, others, at) => {
          const params: string[] = [...others];
          params.splice(Math.min(at, params.length), 0, `${name}=${value}`);
          const url = `/users/me?${params.join('&')}`;
          const out = redactUrl(url);
          expect(leaks(out, secret), out).toBe(false);
          // The proxy's redaction builds on the same one.
          expect(leaks(redact(url), secret)).toBe(false);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('redacts any value of access_token in any spelling, key-shaped or not', () => {
    fc.assert(
      fc.property(paramName, fc.stringMatching(/^zz[A-Za-z0-9]{18}$/), (name, value) => {
        const out = redactUrl(`/x?a=1&${name}=${value}&b=2`);
        expect(leaks(out, value), out).toBe(false);
        expect(out).toContain('a=1');
        expect(out).toContain('b=2');
      }),
      { numRuns: 200 },
    );
  });

  it("redacts the proxy's one-time sign-in code (code=) in any spelling", () => {
    fc.assert(
      fc.property(
        fc
          .array(fc.boolean(), { minLength: 4, maxLength: 4 })
          .map((up) => [...'code'].map((c, i) => (up[i] ? c.toUpperCase() : c)).join(''))
          .chain(encoded),
        fc.stringMatching(/^zz[A-Za-z0-9_-]{30}$/),
        (name, value) => {
          const out = redact(`/.gatehouse/callback?${name}=${value}&next=%2Fx`);
          expect(leaks(out, value), out).toBe(false);
          expect(out).toContain('next=%2Fx');
        },
      ),
      { numRuns: 100 },
    );
  });

  it('finds secrets in the path too, and behind malformed escapes', () => {
    const key = generateApiKey();
    for (const url of [
      `/users/${key}`,
      `/users/${[...key].map((c) => hex(c, false)).join('')}`,
      `/a%zz/${key}%`,
      `/x?%zz&v=%${key}`,
      `/x?v=${key.slice(0, 10)}%2${key.slice(10)}`,
      `/x?access_token=${key}#frag`,
      `/x?access_token%3d${key}`,
    ]) {
      expect(leaks(redactUrl(url), key), url).toBe(false);
    }
  });

  it('leaves URLs without secrets as they were (the log stays useful)', () => {
    fc.assert(
      fc.property(fc.array(otherParam, { maxLength: 4 }), fc.webPath(), (params, path) => {
        const url = `${path || '/'}${params.length ? `?${params.join('&')}` : ''}`;
        expect(redactUrl(url)).toBe(url);
      }),
      { numRuns: 100 },
    );
  });
});

describe.each(backends())('the service log on %s', (backend) => {
  let s: TestService;
  let key: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    key = await s.keyFor(['user'], s.adminId);
  });
  afterAll(async () => s?.close());

  it('a key given as access_token in any encoding authenticates the same and is never logged', async () => {
    await fc.assert(
      fc.asyncProperty(paramName, encoded(key), async (name, value) => {
        s.logs.length = 0;
        const res = await s.req({ method: 'GET', url: `/users/me?${name}=${value}`, key: '' });
        // Fastify decodes the name once: what reads as access_token authenticates.
        const decodedName = decodeURIComponent(name);
        if (decodedName === 'access_token' && !/%25/.test(value)) expect(res.statusCode, res.body).toBe(200);
        expect(s.logs.length).toBeGreaterThan(0);
        expect(leaks(s.logs.join('\n'), key), s.logs.join('\n')).toBe(false);
      }),
      { numRuns: 40 },
    );
  });

  it('a key sent as X-Request-Id (a client mistake) is not taken as the id that every log line carries', async () => {
    s.logs.length = 0;
    const res = await s.req({ method: 'GET', url: '/users/me', headers: { 'x-request-id': key } });
    expect(res.headers['x-request-id']).not.toBe(key);
    expect(leaks(s.logs.join('\n'), key)).toBe(false);
    const plain = await s.req({ method: 'GET', url: '/users/me', headers: { 'x-request-id': 'trace-42' } });
    expect(plain.headers['x-request-id']).toBe('trace-42');
  });

  it('a key in the path, or in an unknown endpoint, is never logged', async () => {
    s.logs.length = 0;
    for (const url of [
      `/users/${key}`,
      `/nowhere/${encodeURIComponent(key)}`,
      `/users?filter=Email%20%3D%20%22${key}%22`,
    ])
      await s.req({ method: 'GET', url });
    expect(s.logs.length).toBe(3);
    expect(leaks(s.logs.join('\n'), key)).toBe(false);
  });
});

describe.each(backends())('the proxy log on %s', (backend) => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld(backend);
  });
  afterAll(async () => w?.close());

  it('a secret in the URL of a failed request (502, logged) is redacted in any encoding', async () => {
    const down = await w.proxy({ env: { SVC_PROXY_UPSTREAM: 'http://127.0.0.1:1' } });
    await fc.assert(
      fc.asyncProperty(paramName, secretWritten, async (name, { secret, value }) => {
        w.logs.length = 0;
        const r = await fetch(`${down.url}/x?${name}=${value}&n=1`, {
          headers: { authorization: `Bearer ${w.userKey}` },
        });
        await r.arrayBuffer();
        expect(r.status).toBe(502);
        expect(w.logs.join('\n')).toMatch(/answered an error/);
        expect(leaks(w.logs.join('\n'), secret), w.logs.join('\n')).toBe(false);
      }),
      { numRuns: 15 },
    );
  });
});
