import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { backends, freshLocation } from '../helpers.js';
import { printedKey, runCli, type Served, serve } from './run.js';

/**
 * The operator's first hour (issue 28), driving the built CLI from outside: --version, the first
 * administrator's one-time sign-in URL and `gatehouse recover` (once only, refused for others),
 * `gatehouse backup` under write load and serving the copy, file modes, `migrate --status`, and
 * start-up errors that name the setting.
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

describe('gatehouse --version', () => {
  it("prints package.json's version and exits 0", () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    const r = runCli(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${pkg.version}\n`);
  });
});

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

  it('the request log names method, url, status, ms and user, refused requests included', async () => {
    const { location, cleanup } = await freshLocation(backend);
    try {
      const s = await start(['--database', location, '--listen', '127.0.0.1:0']);
      const key = printedKey(s.stdout()) as string;
      const me = (await (
        await fetch(`${s.url}/users/me`, { headers: { authorization: `Bearer ${key}` } })
      ).json()) as {
        ID: string;
      };
      expect((await fetch(`${s.url}/users`)).status).toBe(401);
      expect((await fetch(`${s.url}/users`, { headers: { authorization: 'Bearer gvnope' } })).status).toBe(
        401,
      );
      expect(
        (await fetch(`${s.url}/nothing-here`, { headers: { authorization: `Bearer ${key}` } })).status,
      ).toBe(404);
      await new Promise((r) => setTimeout(r, 200));
      const lines = s
        .stdout()
        .split('\n')
        .filter((l) => l.includes('"msg":"request"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const line = (url: string, status: number) => lines.find((l) => l.url === url && l.status === status);
      expect(line('/users/me', 200)).toMatchObject({ method: 'GET', user: me.ID });
      expect(typeof line('/users/me', 200)?.ms).toBe('number');
      const refused = lines.filter((l) => l.url === '/users' && l.status === 401);
      expect(refused).toHaveLength(2);
      for (const l of refused) expect(l.user).toBeNull();
      expect(line('/nothing-here', 404)).toMatchObject({ method: 'GET', user: me.ID });
      await s.stop();
    } finally {
      await cleanup();
    }
  }, 60_000);

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

describe('backups and file modes (SQLite)', () => {
  it('backs up a running, writing service consistently, and serve --database serves the copy', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-backup-'));
    const location = join(dir, 'data', 'gatehouse.db');
    const s = await start(['--database', location, '--listen', '127.0.0.1:0']);
    const key = printedKey(s.stdout()) as string;
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    // Modes: the folder the service made 0700, the database and its WAL files 0600.
    expect(statSync(join(dir, 'data')).mode & 0o777).toBe(0o700);
    for (const f of ['gatehouse.db', 'gatehouse.db-wal', 'gatehouse.db-shm'])
      expect(statSync(join(dir, 'data', f)).mode & 0o777, f).toBe(0o600);
    // Writers run all along: every user acknowledged before the backup began must be in it.
    const acknowledged: string[] = [];
    let writing = true;
    const writer = async (n: number) => {
      for (let i = 0; writing; i++) {
        const r = await fetch(`${s.url}/users`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ Email: `w${n}-${i}@example.com` }),
        });
        if (r.status === 201) acknowledged.push(r.headers.get('x-id') as string);
      }
    };
    const writers = [writer(1), writer(2), writer(3)];
    await new Promise((r) => setTimeout(r, 1500));
    const before = [...acknowledged];
    const backup = join(dir, 'copy.db');
    const r = runCli(['backup', backup, '--database', location]);
    await new Promise((res) => setTimeout(res, 300));
    writing = false;
    await Promise.all(writers);
    expect(r.code, r.stderr).toBe(0);
    expect(before.length).toBeGreaterThan(10);
    expect(statSync(backup).mode & 0o777).toBe(0o600);
    await s.stop();
    const copy = await start(['--database', backup, '--listen', '127.0.0.1:0']);
    expect(printedKey(copy.stdout())).toBeUndefined(); // not a new database
    const ids = new Set(
      (await (await fetch(`${copy.url}/users?limit=100000`, { headers: auth })).text())
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { ID: string }).ID),
    );
    expect(before.filter((id) => !ids.has(id))).toEqual([]);
    await copy.stop();
    // Every command but serve and migrate refuses a database that is not there.
    const missing = runCli(['backup', join(dir, 'x.db'), '--database', join(dir, 'typo.db')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('does not exist');
    expect(existsSync(join(dir, 'typo.db'))).toBe(false);
  }, 120_000);

  it('tightens the modes of a database an earlier version made 0644; leaves an existing folder alone', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-modes-'));
    mkdirSync(join(dir, 'shared'), { mode: 0o755 });
    const location = join(dir, 'shared', 'old.db');
    writeFileSync(location, '', { mode: 0o644 });
    expect(runCli(['migrate', '--database', location]).code).toBe(0);
    expect(statSync(location).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'shared')).mode & 0o777).toBe(0o755);
  });
});

describe('backup with PostgreSQL', () => {
  it('says to use pg_dump, with the URL but not its password, and writes nothing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-pgbackup-'));
    const r = runCli([
      'backup',
      join(dir, 'x.dump'),
      '--database',
      'postgres://gh:s3cret@db.internal:5432/gatehouse',
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('pg_dump --format=custom');
    expect(r.stderr).toContain('db.internal:5432/gatehouse');
    expect(r.stderr).not.toContain('s3cret');
    expect(existsSync(join(dir, 'x.dump'))).toBe(false);
  });
});

describe.each(backends())('migrate --status on %s', (backend) => {
  it('lists every migration, applied with its time, or pending', async () => {
    const { location, cleanup } = await freshLocation(backend);
    try {
      if (backend === 'sqlite') {
        const none = runCli(['migrate', '--status', '--database', location]);
        expect(none.code).toBe(1);
        expect(none.stderr).toContain('does not exist');
      }
      const pending = runCli(['migrate', '--status', '--database', location]);
      if (backend === 'postgres') {
        expect(pending.stdout).toMatch(/^pending {2}0001_objects_changes$/m);
        expect(pending.stdout).not.toMatch(/^applied/m);
      }
      expect(runCli(['migrate', '--database', location]).code).toBe(0);
      const applied = runCli(['migrate', '--status', '--database', location]);
      expect(applied.code).toBe(0);
      const lines = applied.stdout.trim().split('\n');
      expect(lines.length).toBeGreaterThanOrEqual(8);
      for (const l of lines) expect(l).toMatch(/^applied \d{4}-\d\d-\d\dT\S+Z {2}\d{4}_\w+$/);
    } finally {
      await cleanup();
    }
  }, 60_000);
});

describe('start-up errors name the setting', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-startup-'));

  it('a port in use fails before anything is created or printed, naming server.listen', async () => {
    const busy: Server = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const port = (busy.address() as { port: number }).port;
    try {
      const folder = join(dir, 'never');
      const r = runCli(['serve', '--database', join(folder, 'g.db'), '--listen', `127.0.0.1:${port}`]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('server.listen');
      expect(r.stderr).toContain('in use');
      expect(existsSync(folder)).toBe(false);
    } finally {
      busy.close();
    }
  });

  it('an unreachable database names server.database', () => {
    const r = runCli([
      'serve',
      '--database',
      'postgres://gatehouse@127.0.0.1:1/nothing',
      '--listen',
      '127.0.0.1:0',
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/server\.database: .*127\.0\.0\.1:1/);
    const apikey = runCli([
      'apikey',
      'create',
      '--scope',
      'audit',
      '--database',
      'postgres://gatehouse@127.0.0.1:1/x',
    ]);
    expect(apikey.code).toBe(1);
    expect(apikey.stdout).toBe('');
    expect(apikey.stderr).toContain('server.database');
  });

  it('an SVC_ variable of a known section that is no setting is warned about by name; start-up goes on', async () => {
    const s = await start(['--database', join(dir, 'env.db'), '--listen', '127.0.0.1:0'], {
      SVC_SERVER_LISTN: '127.0.0.1:1',
      SVC_MAIL_HOTS: 'smtp.example.com',
      SVC_PROXY_WHATEVER: 'x', // another program's section: not the service's to judge
    });
    // It started despite them (serve resolved once listening).
    expect(s.url).toMatch(/^http:/);
    await s.stop();
    const r = runCli(['migrate', '--database', join(dir, 'env2.db')], {
      SVC_SERVER_LISTN: '127.0.0.1:1',
      SVC_MAIL_HOTS: 'x',
      SVC_PROXY_WHATEVER: 'x',
    });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('SVC_SERVER_LISTN');
    expect(r.stderr).toContain('SVC_MAIL_HOTS');
    expect(r.stderr).not.toContain('SVC_PROXY_WHATEVER');
  }, 60_000);

  it('a line of the -C file that is not blank, a comment, a header or key = value stops start-up by number', () => {
    const cases: [string, number][] = [
      ['[server\nlisten = 127.0.0.1:0\n', 1],
      ['# settings\n[server]\n; comment\n\nlisten 127.0.0.1:0\n', 5],
      ['[server]\n= 3\n', 2],
      ['[server]]\n', 1],
    ];
    for (const [text, line] of cases) {
      const file = join(dir, `bad-${line}.ini`);
      writeFileSync(file, text);
      const r = runCli(['serve', '-C', file, '--database', join(dir, 'never.db'), '--listen', '127.0.0.1:0']);
      expect(r.code, text).toBe(1);
      expect(r.stdout, text).toBe('');
      expect(r.stderr, text).toContain(`line ${line}`);
    }
    expect(existsSync(join(dir, 'never.db'))).toBe(false);
  });
});
