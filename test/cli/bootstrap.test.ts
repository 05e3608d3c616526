import { afterAll, describe, expect, it } from 'vitest';
import { backends, freshLocation } from '../helpers.js';
import { printedKey, runCli, type Served, serve } from './run.js';

/**
 * The first administrator without curl (issue 28), driving the built CLI from outside: the
 * one-time sign-in URL of bootstrap.email, `gatehouse recover` (once only, refused for anyone but
 * an active administrator), two posts racing with one link, a short password, a link scanner.
 */
const running: Served[] = [];
afterAll(async () => {
  for (const s of running) await s.stop('SIGKILL');
});
const start = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
  const s = await serve(args, env);
  running.push(s);
  return s;
};

const PASSWORD = 'a long pass phrase';
const setupUrl = (stdout: string) => /^\s+(https?:\/\/\S+\/signin\/setup\?code=\S+)$/m.exec(stdout)?.[1];

/** A cookie jar of one: what a browser would keep from Set-Cookie headers. */
function jar() {
  const cookies = new Map<string, string>();
  return {
    keep(res: Response) {
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(';');
        const eq = (pair ?? '').indexOf('=');
        cookies.set((pair ?? '').slice(0, eq), (pair ?? '').slice(eq + 1));
      }
    },
    header: () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
  };
}

/** Opens a one-time URL and posts the form it shows, as a browser without script would. */
async function useSetupUrl(url: string, password: string) {
  const browser = jar();
  const page = await fetch(url, { headers: { accept: 'text/html' } });
  if (page.status !== 200) return { status: page.status, browser };
  const html = await page.text();
  const code = /name="code" value="([^"]+)"/.exec(html)?.[1] ?? '';
  const origin = new URL(url).origin;
  const posted = await fetch(`${origin}/signin/setup`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin, accept: 'text/html' },
    body: new URLSearchParams({ code, password, password2: password }).toString(),
  });
  browser.keep(posted);
  return { status: posted.status, browser };
}

const me = async (base: string, cookie: string) =>
  fetch(`${base}/users/me`, { headers: { cookie } }).then(async (r) => ({
    status: r.status,
    body: r.status === 200 ? ((await r.json()) as Record<string, unknown>) : {},
  }));

/** Signs in with e-mail and password through the API, as the sign-in page does. */
async function signIn(base: string, email: string, password: string) {
  const browser = jar();
  const headers = () => ({
    'content-type': 'application/x-www-form-urlencoded',
    'x-requested-with': 'gatehouse',
    cookie: browser.header(),
  });
  const step = await fetch(`${base}/auth/email`, {
    method: 'POST',
    headers: headers(),
    body: new URLSearchParams({ email }).toString(),
  });
  browser.keep(step);
  const pw = await fetch(`${base}/auth/password`, {
    method: 'POST',
    headers: headers(),
    body: new URLSearchParams({ password }).toString(),
  });
  browser.keep(pw);
  return { status: pw.status, cookie: browser.header() };
}

describe.each(backends())('the first administrator without curl, on %s', (backend) => {
  it('bootstrap.email: a one-time URL signs the administrator in with a chosen password, once', async () => {
    const { location, cleanup } = await freshLocation(backend);
    try {
      const s = await start(['--database', location, '--listen', '127.0.0.1:0'], {
        SVC_BOOTSTRAP_EMAIL: 'root@example.com',
      });
      const out = s.stdout();
      expect(printedKey(out)).toBeDefined();
      const url = setupUrl(out) as string;
      expect(url).toBeDefined();
      expect(url.startsWith(`${s.url}/signin/setup?code=`)).toBe(true);
      expect(out).toMatch(/until \S+Z \(60 minutes\)/);
      // The code is a secret: the request log redacts it.
      const first = await useSetupUrl(url, PASSWORD);
      expect(first.status).toBe(303);
      const signedIn = await me(s.url, first.browser.header());
      expect(signedIn.status).toBe(200);
      expect(signedIn.body).toMatchObject({ Email: 'root@example.com', Admin: true, HavePassword: true });
      // Once only: the same URL again is refused and signs no one in.
      const again = await useSetupUrl(url, 'another long pass phrase');
      expect(again.status).toBe(410);
      expect(again.browser.header()).toBe('');
      // Afterwards e-mail + password works as usual.
      const usual = await signIn(s.url, 'root@example.com', PASSWORD);
      expect(usual.status).toBe(204);
      expect((await me(s.url, usual.cookie)).status).toBe(200);
      // Printed once, in the announcement; never in a log line.
      const code = new URL(url).searchParams.get('code') as string;
      expect(s.stdout().split(code).length - 1).toBe(1);
      await s.stop();
    } finally {
      await cleanup();
    }
  }, 90_000);

  it('gatehouse recover: a fresh once-only URL for an active administrator, nothing for anyone else', async () => {
    const { location, cleanup } = await freshLocation(backend);
    try {
      const s = await start(['--database', location, '--listen', '127.0.0.1:0'], {
        SVC_BOOTSTRAP_EMAIL: 'boss@example.com',
      });
      const key = printedKey(s.stdout()) as string;
      const listen = new URL(s.url).host;
      // An ordinary user with an address: refused, non-zero, no URL.
      const created = await fetch(`${s.url}/users`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ Email: 'worker@example.com', Active: true }),
      });
      expect(created.status).toBe(201);
      for (const email of ['worker@example.com', 'nobody@example.com']) {
        const refused = runCli(['recover', '--email', email, '--database', location, '--listen', listen]);
        expect(refused.code, email).not.toBe(0);
        expect(refused.stdout, email).not.toMatch(/https?:\/\//);
        expect(refused.stderr, email).toContain('no active administrator');
      }
      const r = runCli([
        'recover',
        '--email',
        'BOSS@example.com',
        '--database',
        location,
        '--listen',
        listen,
      ]);
      expect(r.code).toBe(0);
      const url = setupUrl(r.stdout) as string;
      expect(url.startsWith(`${s.url}/signin/setup?code=`)).toBe(true);
      const used = await useSetupUrl(url, PASSWORD);
      expect(used.status).toBe(303);
      expect((await me(s.url, used.browser.header())).status).toBe(200);
      expect((await useSetupUrl(url, 'yet another long phrase')).status).toBe(410);
      // The password chosen there replaced the old one (the bootstrap URL was never used).
      expect((await signIn(s.url, 'boss@example.com', PASSWORD)).status).toBe(204);
      // A second recovery voids the first unused one and replaces the password again.
      const one = setupUrl(runCli(['recover', '--email', 'boss@example.com', '--database', location]).stdout);
      const two = setupUrl(runCli(['recover', '--email', 'boss@example.com', '--database', location]).stdout);
      const base = (u: string | undefined) =>
        `${s.url}/signin/setup?code=${new URL(u as string).searchParams.get('code')}`;
      expect((await useSetupUrl(base(one), 'first replacement phrase')).status).toBe(410);
      expect((await useSetupUrl(base(two), 'second replacement phrase')).status).toBe(303);
      expect((await signIn(s.url, 'boss@example.com', PASSWORD)).status).toBe(403);
      expect((await signIn(s.url, 'boss@example.com', 'second replacement phrase')).status).toBe(204);
      await s.stop();
    } finally {
      await cleanup();
    }
  }, 120_000);

  it('two posts racing with one link: exactly one is signed in', async () => {
    const { location, cleanup } = await freshLocation(backend);
    try {
      const s = await start(['--database', location, '--listen', '127.0.0.1:0'], {
        SVC_BOOTSTRAP_EMAIL: 'race@example.com',
      });
      const url = setupUrl(s.stdout()) as string;
      const code = new URL(url).searchParams.get('code') as string;
      const post = (password: string) =>
        fetch(`${s.url}/signin/setup`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ code, password }).toString(),
        }).then((r) => r.status);
      const statuses = await Promise.all(
        Array.from({ length: 8 }, (_, i) => post(`racing pass phrase number ${i}`)),
      );
      expect(statuses.filter((x) => x === 303)).toHaveLength(1);
      expect(statuses.filter((x) => x !== 303).every((x) => x === 410)).toBe(true);
      const winner = statuses.indexOf(303);
      expect((await signIn(s.url, 'race@example.com', `racing pass phrase number ${winner}`)).status).toBe(
        204,
      );
      await s.stop();
    } finally {
      await cleanup();
    }
  }, 90_000);

  it('a short password keeps the link; a link scanner opening the URL spends nothing', async () => {
    const { location, cleanup } = await freshLocation(backend);
    try {
      const s = await start(['--database', location, '--listen', '127.0.0.1:0'], {
        SVC_BOOTSTRAP_EMAIL: 'ops@example.com',
        SVC_BOOTSTRAP_LINKSECONDS: '120',
      });
      expect(s.stdout()).toMatch(/\(2 minutes\)/);
      const url = setupUrl(s.stdout()) as string;
      for (let i = 0; i < 3; i++) expect((await fetch(url)).status).toBe(200);
      const short = await useSetupUrl(url, 'short');
      expect(short.status).toBe(400);
      expect(short.browser.header()).toBe('');
      expect((await useSetupUrl(url, PASSWORD)).status).toBe(303);
      // A forged code, in any shape, is the same answer as a used one.
      for (const code of ['', 'x', 'A'.repeat(43), `${'A'.repeat(42)}-`, '%2e%2e'])
        expect((await fetch(`${s.url}/signin/setup?code=${code}`)).status).toBe(410);
      // A cross-site form post is refused even with a good-looking code.
      const cross = await fetch(`${s.url}/signin/setup`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
        body: new URLSearchParams({ code: 'A'.repeat(43), password: PASSWORD }).toString(),
      });
      expect(cross.status).toBe(403);
      await s.stop();
    } finally {
      await cleanup();
    }
  }, 90_000);
});
