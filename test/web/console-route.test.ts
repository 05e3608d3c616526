import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, type Browser, signIn } from '../kit/index.js';

/*
 * The /console route as an attacker sees it, with generated paths: wherever a path under
 * /console points, a signed-out browser is sent to sign in with a return URL that is a console
 * path (never another place), a non-administrator gets the refusal and never the console's
 * script, and /console/assets/ serves the two files the build named and nothing else.
 */
const ROOT = new URL('../..', import.meta.url).pathname;
const CONSOLE_PATH = /^\/console(?:\/[A-Za-z0-9._~-]+)*\/?$/;

/** Path characters as an attacker would send them: plain, encoded, traversal, other hosts. */
const segment = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9._~-]{1,12}$/),
  fc.constantFrom(
    '..',
    '.',
    '%2e%2e',
    '%2F',
    '%2f%2fevil.example',
    '%5C',
    '%00',
    '@evil.example',
    '%0d%0aX:1',
    'a%20b',
    '~',
  ),
  fc.string({ minLength: 1, maxLength: 6 }).map((s) => encodeURIComponent(s)),
);
const consolePath = fc
  .array(segment, { maxLength: 4 })
  .map((parts) => `/console/${parts.join('/')}`)
  // Dot segments that climb out of /console are resolved before routing (another route answers).
  .filter((p) => /^\/console(\/|$)/.test(new URL(p, 'http://x').pathname));

describe('the /console route (generated paths)', () => {
  let s: TestService;
  let plain: Browser;
  let manifest: { js: string; css: string };

  beforeAll(async () => {
    // `npm test` builds the bundle before Vitest runs; rebuilding it here while another file's
    // service serves it would race. Build only when a lone run finds none.
    if (!existsSync(join(ROOT, 'dist/console/manifest.json')))
      execFileSync(process.execPath, [join(ROOT, 'scripts/build-console.mjs')], { cwd: ROOT, stdio: 'pipe' });
    manifest = JSON.parse(readFileSync(join(ROOT, 'dist/console/manifest.json'), 'utf8'));
    s = await startTestService(backends()[0] ?? 'sqlite');
    plain = await signIn(s, await account(s, { tag: 'routeplain' }), { password: true });
  }, 60_000);
  afterAll(async () => {
    await s?.close();
  });

  it('sends a signed-out browser to sign in, returning only to a console path', async () => {
    await fc.assert(
      fc.asyncProperty(consolePath, async (path) => {
        const r = await s.req({ method: 'GET', url: path, key: '' });
        if (r.statusCode === 400 || r.statusCode === 404) return; // a path the server refuses to parse
        expect(r.statusCode, path).toBe(303);
        const to = new URL(String(r.headers.location), 'http://service.test');
        expect(to.origin).toBe('http://service.test');
        expect(to.pathname).toBe('/signin');
        const back = to.searchParams.get('return') ?? '';
        expect(back, path).toMatch(CONSOLE_PATH);
        // A plain console path comes back as asked (dot segments resolved, as the server does).
        const plainPath = new URL(path, 'http://x').pathname;
        if (CONSOLE_PATH.test(plainPath)) expect(back).toBe(plainPath);
      }),
      { numRuns: 300 },
    );
  }, 60_000);

  it("refuses a non-administrator everywhere under /console, without the console's script", async () => {
    await fc.assert(
      fc.asyncProperty(consolePath, async (path) => {
        const r = await plain.req({ url: path });
        if (r.statusCode === 400 || r.statusCode === 404) return;
        expect(r.statusCode, path).toBe(403);
        expect(r.body).toContain('The console is for administrators');
        expect(r.body).not.toContain(manifest.js);
        expect(String(r.headers['content-security-policy'])).not.toContain('unsafe-inline');
      }),
      { numRuns: 200 },
    );
  }, 60_000);

  it('serves from /console/assets/ only the files the build named', async () => {
    const named = new Set([manifest.js, manifest.css]);
    const names = fc.oneof(
      fc.constantFrom(
        manifest.js,
        manifest.css,
        'manifest.json',
        '..%2Fmanifest.json',
        '%2e%2e%2fpackage.json',
        `${manifest.js}.map`,
      ),
      fc.string({ minLength: 1, maxLength: 40 }).map((x) => encodeURIComponent(x)),
    );
    await fc.assert(
      fc.asyncProperty(names, async (name) => {
        const r = await s.req({ method: 'GET', url: `/console/assets/${name}`, key: '' });
        if (named.has(name)) {
          expect(r.statusCode).toBe(200);
          expect(r.headers['cache-control']).toBe('public, max-age=31536000, immutable');
        } else if (/^\.{1,2}$/.test(name)) {
          // A dot segment is resolved by the router: `/console/assets/.` is the console's own
          // path, which sends a signed-out browser to sign in; no file is served either way.
          expect([303, 400, 404], name).toContain(r.statusCode);
          expect(String(r.headers['content-type'] ?? '')).not.toMatch(/javascript|css/);
        } else expect([400, 404], name).toContain(r.statusCode);
      }),
      { numRuns: 300 },
    );
  }, 60_000);
});
