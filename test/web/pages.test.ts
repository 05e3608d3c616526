import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, PW, setTenant, signedIn } from '../kit/index.js';

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
      expect(r.body).toMatch(/<script src="\/signin\/assets\/app-[A-Z0-9]{8}\.js" defer><\/script>/);
      expect(r.body).not.toMatch(/<script>[^<]/);
    }
    const debug = await s.req({ url: '/signin/debug', key: '' });
    expect(debug.body).toContain('id="d-method"');
    // The bundles (src/web/assets/, built into dist/pages/) are named by their content: kept for good.
    const script = /<script src="(\/signin\/assets\/app-[A-Z0-9]{8}\.js)"/.exec(debug.body)?.[1] ?? 'MISSING';
    const style = /<link rel="stylesheet" href="(\/signin\/assets\/style-[A-Z0-9]{8}\.css)">/.exec(
      debug.body,
    )?.[1];
    const js = await s.req({ url: script, key: '' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toMatch(/^text\/javascript/);
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const css = await s.req({ url: style ?? 'MISSING', key: '' });
    expect(css.headers['content-type']).toMatch(/^text\/css/);
    expect(css.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    // Only the files of the build: no other name under /signin/assets/ answers.
    for (const url of ['/signin/assets/app.js', '/signin/assets/style.css', '/signin/assets/manifest.json'])
      expect((await s.req({ url, key: '' })).statusCode, url).toBe(404);
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

  it('names the App the proxy sign-in continues to, escaped, and only an App with a proxy', async () => {
    const name = 'Pay <b>roll</b> & "co"';
    const made = await s.req({ method: 'POST', url: '/apps', payload: { Name: name } });
    expect(made.statusCode, made.body).toBe(201);
    const id = String(made.headers['x-id']);
    const lead = async (ret: string) => {
      const body = (await s.req({ url: `/signin?return=${encodeURIComponent(ret)}`, key: '' })).body;
      return /<span id="destination">([^<]*)<\/span>/.exec(body)?.[1] ?? 'MISSING';
    };
    // No proxy token yet: the back channel would refuse the App, so the page does not name it.
    expect(await lead(`/proxy/v1/signin?app=${id}`)).toBe('Gatehouse');
    expect((await s.req({ method: 'POST', url: `/apps/${id}/proxytoken` })).statusCode).toBe(201);
    expect(await lead(`/proxy/v1/signin?app=${id}&state=x`)).toBe(
      'Pay &lt;b&gt;roll&lt;/b&gt; &amp; &quot;co&quot;',
    );
    expect(await lead('https://app.example.com/x')).toBe('app.example.com');
    expect(await lead('/signin/enroll')).toBe('Gatehouse');
    // Whatever is in the app parameter, the page names that App or nobody, and echoes nothing.
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 40 }), async (junk) => {
        fc.pre(junk !== id);
        const got = await lead(`/proxy/v1/signin?app=${encodeURIComponent(junk)}`);
        expect(got).toBe('Gatehouse');
      }),
      { numRuns: 40 },
    );
  });

  it('draws the top bar for the state: Sign in when signed out, Sign out when signed in', async () => {
    const visible = (html: string) =>
      [...html.matchAll(/<a href="[^"]*" data-when="(in|out)"( hidden)?[^>]*>([^<]*)<\/a>/g)]
        .filter((m) => m[2] === undefined)
        .map((m) => m[3]);
    for (const url of ['/signin', '/signin/debug', '/signin/enroll', '/signin/signout'])
      expect(visible((await s.req({ url, key: '' })).body), url).toEqual(['Sign in']);
    const b = await signedIn(s, (await account(s, { tag: 'bar' })).email, PW);
    for (const url of ['/signin', '/signin/debug', '/signin/enroll', '/signin/signout']) {
      const r = await b.req({ url });
      expect(visible(r.body), url).toEqual(['Security settings', 'Access requests', 'Sign out']);
      // The explorer's "Sign in first" is there for the script, hidden.
      if (url === '/signin/debug')
        expect(r.body).toMatch(/<span data-when="out" hidden> <a [^>]*>Sign in<\/a> first/);
    }
    // An API key is not a browser session: the pages do not offer to end it.
    expect(visible((await s.req({ url: '/signin/debug' })).body)).toEqual(['Sign in']);
  });

  it('escapes what it echoes', async () => {
    const r = await s.req({ url: '/signin?intent=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E', key: '' });
    expect(r.body).not.toContain('<script>alert(1)');
    expect(r.body).toContain('&quot;&gt;&lt;script&gt;');
  });
});
