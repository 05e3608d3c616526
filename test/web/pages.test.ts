import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { setTenant } from '../kit/index.js';

/** The return URL the page will send the browser to (data-return), '' when refused. */
const returnOf = (html: string) =>
  /data-return="([^"]*)"/.exec(html)?.[1]?.replace(/&amp;/g, '&') ?? 'MISSING';

describe.each(backends())('sign-in pages on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
    await setTenant(s, { AllowedReturnOrigins: ['https://app.example.com'] });
  });
  afterAll(async () => s?.close());

  it('serves /signin, /signin/debug, /signin/enroll, /signin/signout as HTML with a CSP, without credentials', async () => {
    for (const url of ['/signin', '/signin/debug', '/signin/enroll', '/signin/signout']) {
      const r = await s.req({ url, key: '' });
      expect(r.statusCode, url).toBe(200);
      expect(r.headers['content-type']).toMatch(/^text\/html/);
      expect(String(r.headers['content-security-policy'])).toContain("script-src 'self'");
      expect(String(r.headers['content-security-policy'])).toContain("frame-ancestors 'none'");
      expect(r.body).toContain('<script src="/signin/assets/app.js" defer></script>');
      expect(r.body).not.toMatch(/<script>[^<]/);
    }
    const debug = await s.req({ url: '/signin/debug', key: '' });
    expect(debug.body).toContain('id="d-method"');
    const js = await s.req({ url: '/signin/assets/app.js', key: '' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toMatch(/^text\/javascript/);
    expect((await s.req({ url: '/signin/assets/style.css', key: '' })).headers['content-type']).toMatch(
      /^text\/css/,
    );
  });

  it('return URLs: allowed origins and own paths only; open-redirect attempts are dropped', async () => {
    const get = async (ret: string) =>
      returnOf(
        (
          await s.req({
            url: `/signin?return=${encodeURIComponent(ret)}`,
            key: '',
            headers: { host: 'id.example.org' },
          })
        ).body,
      );
    expect(await get('https://app.example.com/after?x=1')).toBe('https://app.example.com/after?x=1');
    expect(await get('/signin/enroll')).toBe('/signin/enroll');
    expect(await get('http://id.example.org/x')).toBe('http://id.example.org/x');
    for (const evil of [
      'https://evil.example.net/',
      '//evil.example.net/',
      '/\\evil.example.net',
      '\\\\evil.example.net',
      'javascript:alert(1)',
      'data:text/html,<script>alert(1)</script>',
      'https://app.example.com.evil.net/',
      'https://user:pw@app.example.com/',
      'http://app.example.com/',
      ' https://app.example.com/',
      'https://app.example.com\t.evil.net/',
    ]) {
      expect(await get(evil), evil).toBe('');
    }
    const page = await s.req({ url: '/signin?return=https%3A%2F%2Fevil.example.net%2F', key: '' });
    expect(page.body).toContain('not on the list of allowed return addresses');
  });

  it('escapes what it echoes', async () => {
    const r = await s.req({ url: '/signin?intent=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E', key: '' });
    expect(r.body).not.toContain('<script>alert(1)');
    expect(r.body).toContain('&quot;&gt;&lt;script&gt;');
  });
});
