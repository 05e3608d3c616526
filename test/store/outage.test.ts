import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONNECT_TIMEOUT_MS } from '../../src/store/db.js';
import { DATABASE_RETRY_AFTER_S, databaseUnavailable } from '../../src/store/unavailable.js';
import { printedKey, type Served, serve } from '../cli/run.js';
import { backends } from '../helpers.js';
import { createPgDatabase, PG_ADMIN_URL } from '../pg.js';
import { type PrivateCluster, privateClusterUnavailable, startPrivateCluster } from '../pgcluster.js';
import { checkAfterFault, createUser, sleep, writeThrough } from './faults.js';

/*
 * Real database faults on PostgreSQL, against `gatehouse serve` in a process of its own (a crash
 * shows as its exit): the service's backends terminated under write load, and the database refusing
 * new connections. The service must fail only the requests that needed the database, with 503 and
 * Retry-After and within a bounded time, stay up, report itself down on /healthz, and recover by
 * itself. Only this test's own database is touched, so the other suites running beside it are not.
 * On SQLite the fault is a database locked by another process beyond the busy timeout.
 */

describe('which errors mean the database is unavailable', () => {
  const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });
  it('connection failures and a busy database, not refused statements or bugs', () => {
    for (const e of [
      withCode('57P01', 'terminating connection due to administrator command'),
      withCode('57P03', 'the database system is starting up'),
      withCode('08006'),
      withCode('53300', 'sorry, too many clients already'),
      withCode('55000', 'database "x" is not currently accepting connections'),
      withCode('ECONNREFUSED'),
      withCode('ECONNRESET'),
      withCode('SQLITE_BUSY'),
      withCode('SQLITE_FULL'),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
    ])
      expect(databaseUnavailable(e), `${(e as { code?: string }).code} ${e.message}`).toBe(true);
    for (const e of [
      withCode('23505', 'duplicate key value violates unique constraint'),
      withCode('42P01', 'relation does not exist'),
      withCode('55000', 'object not in prerequisite state'),
      withCode('SQLITE_CONSTRAINT_UNIQUE'),
      new TypeError('x is undefined'),
      'Connection terminated',
      undefined,
    ])
      expect(databaseUnavailable(e), String(e)).toBe(false);
  });
});

describe('a locked database (SQLite)', () => {
  it('a write that meets the lock answers 503 with Retry-After, within the busy timeout; reads go on; it works again once the lock is gone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gh-outage-'));
    const file = join(dir, 'gatehouse.db');
    const s = await serve(['--database', file, '--listen', '127.0.0.1:0']);
    const key = printedKey(s.stdout()) as string;
    const lock = new SQLite(file);
    try {
      lock.exec('BEGIN EXCLUSIVE');
      const t0 = Date.now();
      const w = await createUser(s.url, key, 1);
      expect(w.status).toBe(503);
      expect(w.retryAfter).toBe(String(DATABASE_RETRY_AFTER_S));
      expect(w.code).toBe('Service Unavailable');
      expect(Date.now() - t0).toBeLessThan(8_000);
      // WAL: readers are not blocked by a writer.
      expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
      lock.exec('COMMIT');
      expect((await createUser(s.url, key, 2)).status).toBe(201);
      expect(s.proc.exitCode, s.stdout()).toBeNull();
    } finally {
      lock.close();
      await s.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

describe.skipIf(!backends().includes('postgres'))('database outages (PostgreSQL)', () => {
  let s: Served;
  let key: string;
  let name: string;
  let drop: () => Promise<void>;
  let admin: pg.Client;

  const terminate = () =>
    admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [name],
    );

  const post = (i: number) => createUser(s.url, key, i);

  beforeAll(async () => {
    const created = await createPgDatabase('gh_outage');
    drop = created.drop;
    name = new URL(created.url).pathname.slice(1);
    admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    s = await serve(['--database', created.url, '--listen', '127.0.0.1:0']);
    key = printedKey(s.stdout()) as string;
    expect(key).toBeDefined();
  }, 60_000);

  afterAll(async () => {
    await s?.stop();
    await admin?.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`).catch(() => {});
    await admin?.end();
    await drop?.();
  });

  it('terminated backends under write load: 503 with Retry-After for the writes that met it, never a crash, no acknowledged write lost', async () => {
    const { outcomes, subscriber } = await writeThrough(s.url, key, async () => {
      // Four rounds of terminations while the writers run.
      for (let i = 0; i < 4; i++) {
        await terminate();
        await sleep(400);
      }
    });
    await checkAfterFault(s, key, outcomes, subscriber);
  }, 60_000);

  it('a database that refuses connections: 503 within the connect timeout, /healthz 503, back by itself once it accepts them', async () => {
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    await terminate();
    try {
      const t0 = Date.now();
      const w = await post(-1);
      expect(w.status).toBe(503);
      expect(w.retryAfter).toBe(String(DATABASE_RETRY_AFTER_S));
      expect(Date.now() - t0).toBeLessThan(CONNECT_TIMEOUT_MS + 2_000);
      const h = await fetch(`${s.url}/healthz`);
      expect(h.status).toBe(503);
      expect(h.headers.get('retry-after')).toBe(String(DATABASE_RETRY_AFTER_S));
      expect(((await h.json()) as { Code: string }).Code).toBe('Service Unavailable');
    } finally {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    }
    const t1 = Date.now();
    let up = false;
    while (!up && Date.now() - t1 < 10_000) {
      up = (await fetch(`${s.url}/healthz`)).status === 200;
      if (!up) await sleep(100);
    }
    expect(up).toBe(true);
    expect((await post(-2)).status).toBe(201);
    expect(s.proc.exitCode, s.stdout()).toBeNull();
  }, 60_000);
});

const noCluster = privateClusterUnavailable();
if (noCluster) {
  if (process.env.CI === 'true')
    throw new Error(`outage test: ${noCluster}, and CI=true: install PostgreSQL`);
  process.stdout.write(`\n*** ${noCluster}: the PostgreSQL restart test is skipped ***\n\n`);
}

describe.skipIf(noCluster !== undefined)("a PostgreSQL server restart (a cluster of the test's own)", () => {
  let cluster: PrivateCluster;
  let s: Served;
  let key: string;
  beforeAll(async () => {
    cluster = await startPrivateCluster();
    s = await serve(['--database', cluster.url, '--listen', '127.0.0.1:0']);
    key = printedKey(s.stdout()) as string;
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
    cluster?.destroy();
  });

  it('the server stopped for two seconds under write load, then started: 503 meanwhile, /healthz 503, back by itself, nothing lost', async () => {
    let health = 0;
    const { outcomes, subscriber } = await writeThrough(s.url, key, async () => {
      cluster.stop();
      await sleep(500);
      health = (await fetch(`${s.url}/healthz`)).status;
      await sleep(1_500);
      cluster.start();
    });
    expect(health).toBe(503);
    await checkAfterFault(s, key, outcomes, subscriber);
  }, 60_000);
});
