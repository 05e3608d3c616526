// A throwaway PostgreSQL database for a benchmark run.
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * Creates a new, empty database next to `adminUrl` (a URL of an existing database, used only to
 * run CREATE/DROP DATABASE). Returns { url, name, drop() }; drop() removes it, even with
 * connections still open.
 */
export async function createTempDatabase(adminUrl) {
  const name = `gatehouse_bench_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  let dropped = false;
  return {
    name,
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
