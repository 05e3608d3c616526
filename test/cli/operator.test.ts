import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { backends, freshLocation } from '../helpers.js';
import { printedKey, runCli, type Served, serve } from './run.js';

/**
 * The operator's first hour (issue 28), driving the built CLI from outside: --version, the request
 * log's fields, `gatehouse backup` under write load and serving the copy, file modes,
 * `migrate --status`, and start-up errors that name the setting. The first administrator's
 * one-time URL and `gatehouse recover` are in bootstrap.test.ts.
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

describe.each(backends())('the request log on %s', (backend) => {
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
