import { execFileSync } from 'node:child_process';
import pg from 'pg';

/** Where the test suite finds PostgreSQL (trust auth); override with GATEHOUSE_TEST_PG. */
export const PG_ADMIN_URL = process.env.GATEHOUSE_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export async function pgReachable(url = PG_ADMIN_URL): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Starts the machine's PostgreSQL cluster if it is installed but down (as the developers' guide says). */
export function tryStartLocalCluster(): void {
  try {
    const versions = execFileSync('ls', ['/etc/postgresql'], { encoding: 'utf8' }).trim().split('\n');
    const v = versions[versions.length - 1];
    if (v)
      execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', v, 'main', 'start'], { stdio: 'ignore' });
  } catch {
    // not installed, or already running: pgReachable decides
  }
}

/** Creates a throwaway database and returns its URL and a function that drops it. */
export async function createPgDatabase(
  prefix = 'gh_test',
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
