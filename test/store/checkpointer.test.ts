import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { endianness, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CHECKPOINT_EVERY_MS,
  DEFAULT_CHECKPOINT_PAGES,
  WRITER_CHECKPOINT_PAGES,
} from '../../src/store/checkpointer.js';
import { type Db, openDb } from '../../src/store/db.js';

/*
 * SQLite's checkpoints run in a worker thread, not inside the writer's commits on the event loop
 * (src/store/checkpointer.ts). What a checkpoint did is read where SQLite keeps it, the wal-index
 * (https://www.sqlite.org/walformat.html): the header's `mxFrame` (frames in the WAL) and the
 * checkpoint information's `nBackfill` (frames already copied back into the database file).
 */
const MX_FRAME_OFFSET = 16;
const N_BACKFILL_OFFSET = 96;

const walIndex = (location: string) => {
  const shm = readFileSync(`${location}-shm`);
  const u32 = (at: number) => (endianness() === 'LE' ? shm.readUInt32LE(at) : shm.readUInt32BE(at));
  return { mxFrame: u32(MX_FRAME_OFFSET), nBackfill: u32(N_BACKFILL_OFFSET) };
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('SQLite checkpoints in a worker thread', () => {
  const dirs: string[] = [];
  const dbs: Db[] = [];
  const open = (backgroundCheckpoints: boolean) => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-checkpoint-'));
    dirs.push(dir);
    const location = join(dir, 'g.db');
    const db = openDb(location, { backgroundCheckpoints });
    dbs.push(db);
    return { db, location };
  };
  /** Transactions of ten pages of new data each, as the service's writes append them. */
  const write = async (db: Db, transactions: number) => {
    await sql`CREATE TABLE IF NOT EXISTS t (x BLOB)`.execute(db.kysely);
    for (let i = 0; i < transactions; i++)
      await db.kysely.transaction().execute(async (trx) => {
        for (let j = 0; j < 10; j++) await sql`INSERT INTO t VALUES (${randomBytes(4000)})`.execute(trx);
      });
  };
  const autocheckpoint = async (db: Db) =>
    (await sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`.execute(db.kysely)).rows[0]
      ?.wal_autocheckpoint;

  afterEach(async () => {
    for (const db of dbs.splice(0)) await db.close();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('copies what the writer committed back into the database file, without the writer', async () => {
    const { db, location } = open(true);
    expect(await autocheckpoint(db)).toBe(WRITER_CHECKPOINT_PAGES);
    await write(db, 40);
    const written = walIndex(location).mxFrame;
    // Far below the writer's own threshold: only the worker can have copied these.
    expect(written).toBeGreaterThan(400);
    expect(written).toBeLessThan(WRITER_CHECKPOINT_PAGES);
    // The worker's next pass, however long a loaded machine takes to start the thread and run it.
    await vi.waitFor(() => expect(walIndex(location)).toEqual({ mxFrame: written, nBackfill: written }), {
      timeout: 30_000,
      interval: CHECKPOINT_EVERY_MS,
    });
  });

  it('is not there unless asked for: the writer keeps SQLite default threshold, and nothing copies below it', async () => {
    const { db, location } = open(false);
    expect(await autocheckpoint(db)).toBe(DEFAULT_CHECKPOINT_PAGES);
    await write(db, 40);
    await sleep(CHECKPOINT_EVERY_MS * 3);
    const { mxFrame, nBackfill } = walIndex(location);
    expect(mxFrame).toBeGreaterThan(400);
    expect(nBackfill).toBe(0);
  });

  it('ends with the database: the worker first, then the writer, which removes the WAL', async () => {
    const { db, location } = open(true);
    await write(db, 5);
    expect(existsSync(`${location}-wal`)).toBe(true);
    await db.close();
    dbs.splice(dbs.indexOf(db), 1);
    expect(existsSync(`${location}-wal`)).toBe(false);
    // Opened again, every row is there.
    const again = openDb(location);
    dbs.push(again);
    const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM t`.execute(again.kysely);
    expect(rows[0]?.n).toBe(50);
  });
});
