import { readFileSync } from 'node:fs';
import { inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAVICON_ICO, FAVICON_SVG, faviconPng } from '../../src/web/favicon.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, signIn } from '../kit/index.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

/** The RGBA pixels of the icon's PNG (one IDAT, filter 0 on every row, as faviconPng writes it). */
function pixelsOf(png: Buffer): { width: number; height: number; at: (x: number, y: number) => number[] } {
  expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  let off = 8;
  let width = 0;
  let height = 0;
  const idat: Buffer[] = [];
  for (;;) {
    const len = png.readUInt32BE(off);
    const type = png.toString('ascii', off + 4, off + 8);
    const data = png.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      expect([...data.subarray(8)]).toEqual([8, 6, 0, 0, 0]);
    }
    if (type === 'IDAT') idat.push(data);
    off += 12 + len;
    if (type === 'IEND') break;
  }
  expect(off).toBe(png.length);
  const rows = inflateSync(Buffer.concat(idat));
  expect(rows.length).toBe(height * (width * 4 + 1));
  return {
    width,
    height,
    at(x, y) {
      const row = y * (width * 4 + 1);
      expect(rows[row]).toBe(0);
      const p = row + 1 + x * 4;
      return [...rows.subarray(p, p + 4)];
    },
  };
}

describe('the icon', () => {
  it('is a 32×32 PNG in an ICO container: transparent corners, the gradient, the white arch', () => {
    const ico = FAVICON_ICO;
    expect(ico.readUInt16LE(0)).toBe(0);
    expect(ico.readUInt16LE(2)).toBe(1); // icon
    expect(ico.readUInt16LE(4)).toBe(1); // one image
    expect([ico[6], ico[7]]).toEqual([32, 32]);
    expect(ico.readUInt16LE(12)).toBe(32);
    const size = ico.readUInt32LE(14);
    const offset = ico.readUInt32LE(18);
    expect(offset).toBe(22);
    expect(offset + size).toBe(ico.length);
    const png = ico.subarray(offset);
    expect(png).toEqual(faviconPng());
    const img = pixelsOf(png);
    expect([img.width, img.height]).toEqual([32, 32]);
    expect(img.at(0, 0)[3]).toBe(0); // the rounded corner
    expect(img.at(31, 31)[3]).toBe(0);
    expect(img.at(16, 20)).toEqual([255, 255, 255, 255]); // inside the arch
    const [r, g, b, a] = img.at(3, 16) as number[]; // the gradient, left of the arch
    expect(a).toBe(255);
    expect(b).toBeGreaterThan(r as number);
    expect(b).toBeGreaterThan(g as number);
  });

  it('the SVG draws the same shapes', () => {
    expect(FAVICON_SVG).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(FAVICON_SVG).toContain('rx="8"');
    expect(FAVICON_SVG).toContain('M10 26V15a6 6 0 0 1 12 0v11z');
    expect(FAVICON_SVG).not.toMatch(/<script|on\w+=|href="(?!#)/i);
  });
});

describe.each(backends())('GET / and the icon on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('sends a browser to the sign-in page with 303, without credentials', async () => {
    for (const method of ['GET', 'HEAD'] as const) {
      const r = await s.req({
        method,
        url: '/',
        key: '',
        headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
      });
      expect(r.statusCode, method).toBe(303);
      expect(r.headers.location).toBe('/signin');
      expect(String(r.headers.vary)).toMatch(/accept/i);
    }
    // The page it points at is there.
    expect((await s.req({ url: '/signin', key: '' })).statusCode).toBe(200);
  });

  it('answers other clients with a small JSON index whose links all work', async () => {
    for (const accept of [undefined, '*/*', 'application/json']) {
      const r = await s.req({ url: '/', key: '', headers: accept ? { accept } : {} });
      expect(r.statusCode, String(accept)).toBe(200);
      expect(r.headers['content-type']).toMatch(/^application\/json/);
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(String(r.headers.vary)).toMatch(/accept/i);
      const index = r.json() as { Name: string; Version: string; Links: Record<string, string> };
      expect(index.Name).toBe('Gatehouse');
      expect(index.Version).toBe(pkg.version);
      expect(index.Links).toEqual({
        SignIn: '/signin',
        APIExplorer: '/signin/debug',
        OpenAPI: '/openapi.json',
        Health: '/healthz',
      });
      for (const link of Object.values(index.Links))
        expect((await s.req({ url: link, key: '' })).statusCode, link).toBe(200);
    }
  });

  it('follows the tenant sign-in URL when the pages are elsewhere', async () => {
    const t = await s.req({ url: '/tenant' });
    const put = await s.req({
      method: 'PUT',
      url: '/tenant',
      headers: { 'if-match': String(t.headers.etag) },
      payload: { ...(t.json() as object), SigninURL: 'https://login.example.com/signin' },
    });
    expect(put.statusCode, put.body).toBe(204);
    try {
      const r = await s.req({ url: '/', key: '', headers: { accept: 'text/html' } });
      expect(r.statusCode).toBe(303);
      expect(r.headers.location).toBe('https://login.example.com/signin');
      const j = (await s.req({ url: '/', key: '' })).json() as { Links: Record<string, string> };
      expect(j.Links.SignIn).toBe('https://login.example.com/signin');
    } finally {
      const t2 = await s.req({ url: '/tenant' });
      await s.req({
        method: 'PUT',
        url: '/tenant',
        headers: { 'if-match': String(t2.headers.etag) },
        payload: { ...(t2.json() as object), SigninURL: '' },
      });
    }
  });

  it('serves /favicon.svg and /favicon.ico with their types, long caching, ETag and 304', async () => {
    for (const [url, type, body] of [
      ['/favicon.svg', 'image/svg+xml', Buffer.from(FAVICON_SVG)],
      ['/favicon.ico', 'image/x-icon', FAVICON_ICO],
    ] as const) {
      const r = await s.req({ url, key: '' });
      expect(r.statusCode, url).toBe(200);
      expect(r.headers['content-type'], url).toBe(type);
      expect(r.rawPayload.equals(body), url).toBe(true);
      expect(r.headers['cache-control']).toBe('public, max-age=86400');
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(String(r.headers['content-security-policy'])).toContain("default-src 'none'");
      const etag = String(r.headers.etag);
      expect(etag).toMatch(/^"[A-Za-z0-9_-]{16}"$/);
      const again = await s.req({ url, key: '', headers: { 'if-none-match': `"other", ${etag}` } });
      expect(again.statusCode).toBe(304);
      expect(again.body).toBe('');
      expect(again.headers.etag).toBe(etag);
      expect((await s.req({ url, key: '', headers: { 'if-none-match': '"other"' } })).statusCode).toBe(200);
    }
  });

  it('every sign-in page links the icon, which its CSP allows (img-src self)', async () => {
    for (const url of ['/signin', '/signin/enroll', '/signin/signout', '/signin/debug']) {
      const r = await s.req({ url, key: '' });
      expect(r.body, url).toContain('<link rel="icon" href="/favicon.ico" sizes="32x32">');
      expect(r.body, url).toContain('<link rel="icon" href="/favicon.svg" type="image/svg+xml">');
      expect(String(r.headers['content-security-policy'])).toMatch(/img-src 'self'/);
    }
  });

  it('the group pages link the icon too, which their CSP allows (img-src self)', async () => {
    const b = await signIn(s, await account(s), { password: true });
    const r = await b.req({ url: '/signin/groups/nosuchgroup' });
    expect(r.statusCode).toBe(404);
    expect(r.body).toContain('<link rel="icon" href="/favicon.ico" sizes="32x32">');
    expect(r.body).toContain('<link rel="icon" href="/favicon.svg" type="image/svg+xml">');
    expect(String(r.headers['content-security-policy'])).toMatch(/img-src 'self'/);
  });
});
