import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../src/schema/type.js';
import { backends, freshLocation } from '../helpers.js';
import { printedKey, runCli, runCliAsync, type Served, serve } from './run.js';

const running: Served[] = [];
afterAll(async () => {
  for (const s of running) await s.stop('SIGKILL');
});
const start = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
  const s = await serve(args, env);
  running.push(s);
  return s;
};

describe.each(backends())('gatehouse serve on %s', (backend) => {
  it('prints the first admin key once, and serves the README walk-through', async () => {
    const { location, cleanup } = await freshLocation(backend);
    try {
      const first = await start(['--database', location, '--listen', '127.0.0.1:0']);
      const key = printedKey(first.stdout());
      expect(key).toBeDefined();
      expect(first.stdout()).toContain('shown only this once');
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      // The README's curl walk-through, over real HTTP.
      const created = await fetch(`${first.url}/users`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ Email: 'ada@example.com', Name: { FullName: 'Ada Lovelace' } }),
      });
      expect(created.status).toBe(201);
      const path = created.headers.get('location') as string;
      const read = await fetch(`${first.url}${path}`, { headers: auth });
      expect(read.status).toBe(200);
      const user = (await read.json()) as Record<string, unknown>;
      const updated = await fetch(`${first.url}${path}`, {
        method: 'PUT',
        headers: { ...auth, 'if-match': read.headers.get('etag') as string },
        body: JSON.stringify({ ...user, UserName: 'ada' }),
      });
      expect(updated.status).toBe(204);
      const list = await fetch(`${first.url}/users?filter=${encodeURIComponent('UserName = "ada"')}`, {
        headers: auth,
      });
      const lines = (await list.text()).trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0] as string).Item.Email).toBe('ada@example.com');
      expect(await first.stop()).toBe(0);

      const second = await start(['--database', location, '--listen', '127.0.0.1:0']);
      expect(printedKey(second.stdout())).toBeUndefined();
      expect((await fetch(`${second.url}/users/me`, { headers: auth })).status).toBe(200);
      expect(await second.stop()).toBe(0);
    } finally {
      await cleanup();
    }
  }, 60_000);

  it('finishes requests in flight on SIGTERM, then exits 0', async () => {
    const { location, cleanup } = await freshLocation(backend);
    try {
      const s = await start(['--database', location, '--listen', '127.0.0.1:0']);
      const key = printedKey(s.stdout()) as string;
      let exitedEarly = false;
      void s.exited.then(() => {
        exitedEarly = true;
      });
      // A slow upload: the server cannot answer before the body ends, so the request is surely in flight.
      const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(`${s.url}/users`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        });
        req.on('response', (res) => {
          let body = '';
          res.on('data', (d: Buffer) => {
            body += d.toString();
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        req.write('{"Name":');
        setTimeout(() => {
          s.proc.kill('SIGTERM');
          setTimeout(() => {
            expect(exitedEarly).toBe(false);
            req.end('{"FullName":"In Flight"}}');
          }, 500);
        }, 300);
      });
      const res = await response;
      expect(res.status).toBe(201);
      expect(await s.exited).toBe(0);
    } finally {
      await cleanup();
    }
  }, 60_000);
});

describe('gatehouse CLI', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cli-'));

  it('apikey create refuses a database that does not exist, and prints only the key for one that does', async () => {
    const db = join(dir, 'new.db');
    // A typo in --database must not create a database and print a working key to it.
    const typo = runCli(['apikey', 'create', '--scope', 'audit', '--database', db]);
    expect(typo.code).toBe(1);
    expect(typo.stdout).toBe('');
    expect(typo.stderr).toContain('server.database');
    expect(typo.stderr).toContain('does not exist');
    expect(existsSync(db)).toBe(false);
    const s = await start(['--database', db, '--listen', '127.0.0.1:0']);
    expect(printedKey(s.stdout())).toBeDefined();
    const r = runCli(['apikey', 'create', '--scope', 'audit', '--database', db]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^gv[A-Za-z0-9]{54}\n$/);
    const key = r.stdout.trim();
    expect((await fetch(`${s.url}/users`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect(
      (await fetch(`${s.url}/tenant`, { method: 'PUT', headers: { authorization: `Bearer ${key}` } })).status,
    ).toBe(403);
    await s.stop();
    const bad = runCli(['apikey', 'create', '--scope', 'root', '--database', db]);
    expect(bad.code).not.toBe(0);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toContain(`one of ${SCOPES.join(', ')}`);
    // The help names the scopes as a literal (the CLI loads the object model only when a command
    // runs): it must list exactly SCOPES.
    const help = runCli(['apikey', 'create', '--help']).stdout;
    expect(/one or more scopes: ([a-z, ]+)/.exec(help)?.[1]).toBe(SCOPES.join(', '));
    const noUser = runCli(['apikey', 'create', '--scope', 'user', '--user', 'ghost', '--database', db]);
    expect(noUser.code).toBe(1);
    expect(noUser.stderr).toContain('--user');
  }, 60_000);

  it('apikey create works while the service writes to the same SQLite file, and the service fails no write', async () => {
    const db = join(dir, 'busy.db');
    const s = await start(['--database', db, '--listen', '127.0.0.1:0']);
    const auth = { authorization: `Bearer ${printedKey(s.stdout())}`, 'content-type': 'application/json' };
    // Updates read their object before they write it: with the CLI's commits and its write lock in
    // between, SQLite refused those writes at once (503), and the CLI's own write likewise.
    const groups = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const r = await fetch(`${s.url}/groups`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ Name: `g${i}` }),
        });
        return { id: r.headers.get('x-id') as string, etag: r.headers.get('etag') as string };
      }),
    );
    const statuses = new Map<number, number>();
    let writing = true;
    const load = groups.map(async (g, i) => {
      for (let n = 0; writing; n++) {
        const r = await fetch(`${s.url}/groups/${g.id}`, {
          method: 'PUT',
          headers: { ...auth, 'if-match': g.etag },
          body: JSON.stringify({ Name: `g${i}`, Description: `${n}` }),
        });
        await r.arrayBuffer();
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status !== 204) return;
        g.etag = r.headers.get('etag') as string;
      }
    });
    const keys: string[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const r = await runCliAsync(['apikey', 'create', '--scope', 'audit', '--database', db]);
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        keys.push(r.stdout.trim());
      }
    } finally {
      writing = false;
      await Promise.all(load);
    }
    expect([...statuses.keys()]).toEqual([204]);
    expect(statuses.get(204)).toBeGreaterThan(100);
    for (const key of keys)
      expect((await fetch(`${s.url}/users`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(
        200,
      );
    await s.stop();
  }, 60_000);

  it('migrate applies migrations once', () => {
    const db = join(dir, 'migrate.db');
    const first = runCli(['migrate', '--database', db]);
    expect(first.code).toBe(0);
    expect(first.stderr).toContain('applied: 0001');
    const again = runCli(['migrate', '--database', db]);
    expect(again.stderr).toContain('up to date');
  });

  it('stops start-up on a bad setting, naming the key', () => {
    const db = join(dir, 'bad.db');
    const flag = runCli(['serve', '--database', db, '--listen', 'nonsense']);
    expect(flag.code).toBe(1);
    expect(flag.stderr).toContain('server.listen (from --listen)');
    const env = runCli(['serve', '--database', db], { SVC_SERVER_LISTEN: '127.0.0.1:99999' });
    expect(env.code).toBe(1);
    expect(env.stderr).toContain('server.listen (from SVC_SERVER_LISTEN)');
    const file = join(dir, 'bad.ini');
    writeFileSync(file, '[server]\nlisten = 127.0.0.1:0\nlisen = typo\n');
    const typo = runCli(['serve', '-C', file, '--database', db]);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('server.lisen: unknown setting');
    writeFileSync(file, '[server]\nloglevel = loud\n');
    const level = runCli(['serve', '-C', file, '--database', db]);
    expect(level.stderr).toContain('server.loglevel');
  });

  it('takes settings from flags over environment over file over defaults', async () => {
    const file = join(dir, 'ok.ini');
    writeFileSync(
      file,
      `[server]\nlisten = 127.0.0.1:1\ndatabase = ${join(dir, 'file.db')}\nloglevel = info\n`,
    );
    const fromFile = runCli(['migrate', '-C', file]);
    expect(fromFile.code).toBe(0);
    // env beats the file's listen (port 1 would fail to bind), the flag beats env.
    const s = await start(['-C', file, '--listen', '127.0.0.1:0'], { SVC_SERVER_LISTEN: '127.0.0.1:1' });
    expect(s.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(s.url).not.toMatch(/:1$/);
    await s.stop();
    const envOnly = await serve(['-C', file, '--database', join(dir, 'env.db')], {
      SVC_SERVER_LISTEN: '127.0.0.1:0',
    }).catch((e: Error) => e);
    expect(envOnly).not.toBeInstanceOf(Error);
    if (!(envOnly instanceof Error)) {
      running.push(envOnly);
      expect(envOnly.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      await envOnly.stop();
    }
  }, 60_000);
});
