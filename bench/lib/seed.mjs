// Bulk seeding of objects for benchmarks that need many rows (e.g. a 100,000-user list).
//
// Creating 100,000 users through the API or ObjectStore.create takes minutes on PostgreSQL (one
// transaction per object), so this writes rows in the store's own format directly: the `objects`
// row and its `changes` entry, as ObjectStore.insert does, in a few large transactions. The JSON of
// each row is a template taken from an object created through the API, with a new ID. Only for
// objects without unique fields or hidden state (such as `POST /users` with `{}`), which have no
// `object_keys` rows and no `secret`. On PostgreSQL the table is analyzed afterwards, as autovacuum
// would do shortly after such a load.
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import pg from 'pg';

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/**
 * IDs shaped like the store's own (src/store/stored.ts): the time in milliseconds (base 36, 9
 * characters), then 11 random characters. `at` counts up per row, as IDs of objects made one after
 * another would.
 */
function newId(at) {
  const bytes = randomBytes(11);
  let s = at.toString(36).padStart(9, '0');
  for (const b of bytes) s += ID_ALPHABET[b % ID_ALPHABET.length];
  return s;
}
const newEtag = () => `"${randomBytes(12).toString('base64url')}"`;

const BATCH = 5000;

function makeRows(kind, template, n) {
  const doc = JSON.parse(template);
  const rows = [];
  const start = Date.now() - n;
  for (let i = 0; i < n; i++) {
    const id = newId(start + i);
    doc.ID = id;
    rows.push({ type: kind, id, data: JSON.stringify(doc), etag: newEtag() });
  }
  return rows;
}

/**
 * Adds `count` objects of `kind` to the database at `location` (SQLite file or postgres:// URL),
 * each a copy of `template` (the object's JSON as the API serves it) with a new ID.
 */
export async function seedObjects(location, kind, template, count) {
  if (/^postgres(ql)?:\/\//i.test(location)) return seedPostgres(location, kind, template, count);
  return seedSqlite(location, kind, template, count);
}

function seedSqlite(file, kind, template, count) {
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 10000');
    const change = db.prepare('INSERT INTO changes (type, id, data, etag, time) VALUES (?, ?, ?, ?, ?)');
    const object = db.prepare(
      'INSERT INTO objects (type, id, data, etag, create_time, modify_time, secret) VALUES (?, ?, ?, ?, ?, ?, NULL)',
    );
    const batch = db.transaction((rows) => {
      const now = Date.now();
      for (const r of rows) {
        change.run(r.type, r.id, r.data, r.etag, now);
        object.run(r.type, r.id, r.data, r.etag, now, now);
      }
    });
    for (let done = 0; done < count; done += BATCH)
      batch(makeRows(kind, template, Math.min(BATCH, count - done)));
  } finally {
    db.close();
  }
}

async function seedPostgres(url, kind, template, count) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (let done = 0; done < count; done += BATCH) {
      const rows = makeRows(kind, template, Math.min(BATCH, count - done));
      const ids = rows.map((r) => r.id);
      const data = rows.map((r) => r.data);
      const etags = rows.map((r) => r.etag);
      const now = Date.now();
      await client.query('BEGIN');
      try {
        await client.query(
          `INSERT INTO changes (type, id, data, etag, time)
           SELECT $1, i, d, e, $5 FROM unnest($2::text[], $3::text[], $4::text[]) AS t(i, d, e)`,
          [kind, ids, data, etags, now],
        );
        await client.query(
          `INSERT INTO objects (type, id, data, etag, create_time, modify_time, secret)
           SELECT $1, i, d, e, $5, $5, NULL FROM unnest($2::text[], $3::text[], $4::text[]) AS t(i, d, e)`,
          [kind, ids, data, etags, now],
        );
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw e;
      }
    }
    // Autovacuum analyzes a table soon after this many changes (within autovacuum_naptime, 1 min
    // by default); until then the planner has no statistics for the new rows. Do it now, so the
    // benchmark measures the steady state rather than the first minute after a bulk load.
    await client.query('ANALYZE objects');
  } finally {
    await client.end();
  }
}

/** How many objects of `kind` the database holds. */
export async function countObjects(location, kind) {
  if (/^postgres(ql)?:\/\//i.test(location)) {
    const client = new pg.Client({ connectionString: location });
    await client.connect();
    try {
      const r = await client.query('SELECT count(*)::int AS n FROM objects WHERE type = $1', [kind]);
      return r.rows[0].n;
    } finally {
      await client.end();
    }
  }
  const db = new Database(location, { readonly: true });
  try {
    db.pragma('busy_timeout = 10000');
    return db.prepare('SELECT count(*) AS n FROM objects WHERE type = ?').get(kind).n;
  } finally {
    db.close();
  }
}
