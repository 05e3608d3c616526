import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, PW, signedIn } from '../kit/index.js';

/*
 * Browser code lives in files (src/web/assets/, src/console/), not in strings: no template
 * literal in src/ is longer than MAX_LINES (a page's skeleton is split into parts before that),
 * and every page under /signin sends a Content-Security-Policy that allows no inline script or
 * style, with pages that need none (docs/architecture.md, "Browser code").
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAX_LINES = 80;

function* sources(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) yield* sources(path);
    else if (/\.(ts|tsx|mts)$/.test(e.name) && !e.name.endsWith('.d.ts')) yield path;
  }
}

/** Each template literal of a source longer than `max` lines: where it starts and how long it is. */
function longTemplates(name: string, text: string, max: number): { at: string; lines: number }[] {
  const kind = name.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const sf = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true, kind);
  const found: { at: string; lines: number }[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node)) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      if (last - first + 1 > max) found.push({ at: `${name}:${first + 1}`, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

describe('template literals in src/', () => {
  it(`none is longer than ${MAX_LINES} lines`, () => {
    const files = [...sources(join(ROOT, 'src'))];
    expect(files.length).toBeGreaterThan(100);
    const long = files.flatMap((f) => longTemplates(relative(ROOT, f), readFileSync(f, 'utf8'), MAX_LINES));
    expect(long, 'move browser code to src/web/assets/ and split page skeletons').toEqual([]);
  });

  it('the check finds long templates, plain and with substitutions, nested too', () => {
    const body = Array.from({ length: 81 }, (_, i) => `line ${i}`).join('\n');
    expect(longTemplates('a.ts', `const a = \`${body}\`;`, MAX_LINES)).toEqual([{ at: 'a.ts:1', lines: 81 }]);
    const nested = `f(() => html\`<p>\${x}</p>\n${body}\`);`;
    expect(longTemplates('b.tsx', nested, MAX_LINES)).toEqual([{ at: 'b.tsx:1', lines: 82 }]);
    expect(
      longTemplates('c.ts', `const c = \`${body.split('\n').slice(1).join('\n')}\`;`, MAX_LINES),
    ).toEqual([]);
  });
});

/** Every GET route of the service, from the router's own listing (a new page is in it at once). */
function getRoutes(s: TestService): string[] {
  const tree = s.app.printRoutes({ method: 'GET', commonPrefix: false });
  const stack: string[] = [];
  const routes: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([│ ]*)[├└]── (.+?)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = (m[1] ?? '').length / 4;
    stack.length = depth;
    stack.push(m[2] ?? '');
    if (m[3]?.includes('GET')) routes.push(stack.join('').replace(/^\/\//, '/'));
  }
  return routes;
}

const NO_INLINE = /'unsafe-inline'|'unsafe-eval'|'unsafe-hashes'/;

describe.each(backends())('the pages under /signin on %s', (backend) => {
  let s: TestService;
  let pages: string[];
  beforeAll(async () => {
    s = await startTestService(backend);
    pages = getRoutes(s)
      .filter((r) => r === '/signin' || r.startsWith('/signin/'))
      .map((r) => r.replace(/:[a-z]+/gi, 'no-such-id'));
  });
  afterAll(async () => s?.close());

  it('are all found in the router', () => {
    for (const p of ['/signin', '/signin/enroll', '/signin/vouch/no-such-id', '/signin/groups/no-such-id'])
      expect(pages).toContain(p);
  });

  it('send a CSP without inline script or style, and have neither inline', async () => {
    const a = await account(s, { tag: 'csp' });
    const browsers = [{ cookie: '' }, { cookie: await cookieOf(s, a.email) }];
    let checked = 0;
    for (const url of pages) {
      for (const { cookie } of browsers) {
        const r = await s.req({
          url,
          key: '',
          headers: { accept: 'text/html', ...(cookie ? { cookie } : {}) },
        });
        if (!/^text\/html/.test(String(r.headers['content-type']))) continue;
        checked++;
        const csp = String(r.headers['content-security-policy'] ?? '');
        expect(csp, url).toMatch(/script-src 'self'/);
        expect(csp, url).toMatch(/style-src 'self'/);
        expect(csp, url).not.toMatch(NO_INLINE);
        expect(r.body, url).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/i);
        expect(r.body, url).not.toMatch(/<style[\s>]/i);
        expect(r.body, url).not.toMatch(/<[^>]*\s(style|on[a-z]+)\s*=/i);
        for (const asset of r.body.matchAll(/(?:src|href)="(\/signin\/assets\/[^"]+)"/g)) {
          const got = await s.req({ url: asset[1] ?? '', key: '' });
          expect(got.statusCode, `${url} -> ${asset[1]}`).toBe(200);
          expect(got.headers['cache-control']).toBe('public, max-age=31536000, immutable');
        }
      }
    }
    // Signed out and in, most pages answer as pages (the rest redirect to sign in).
    expect(checked).toBeGreaterThanOrEqual(pages.length);
  }, 60_000);
});

async function cookieOf(s: TestService, email: string): Promise<string> {
  const b = await signedIn(s, email, PW);
  return [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
}
