import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from './db.js';

/** The first key of the two-key advisory locks taken here ('gaet'). */
const NAMED_LOCK_SPACE = 0x6761_6574;

const keyOf = (name: string) => createHash('sha256').update(name).digest().readInt32BE(0);

/**
 * Named locks for the few decisions that read many rows and must not be made twice at once (the
 * last active administrator: two demotions at once would each see the other remain). A holder
 * runs its decision and its write inside `run`; the next one in line decides after that write
 * has committed.
 *
 * Callers of one store queue in memory first, so an instance keeps at most one connection waiting
 * on PostgreSQL; on PostgreSQL the queue's head then takes a session-level advisory lock, which
 * serializes the instances sharing the database (and is released if its connection dies). SQLite
 * has one instance per file, so the in-memory queue is the lock. The wait on PostgreSQL is bounded
 * by the statement timeout (server.databasetimeout).
 */
export class NamedLocks {
  private readonly queues = new Map<string, Promise<void>>();

  constructor(private readonly db: Db) {}

  async run<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const before = this.queues.get(name) ?? Promise.resolve();
    let release = () => {};
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const tail = before.then(() => mine);
    this.queues.set(name, tail);
    try {
      await before;
      if (this.db.dialect !== 'postgres') return await fn();
      const key = keyOf(name);
      return await this.db.kysely.connection().execute(async (conn) => {
        await sql`SELECT pg_advisory_lock(${NAMED_LOCK_SPACE}, ${key})`.execute(conn);
        try {
          return await fn();
        } finally {
          await sql`SELECT pg_advisory_unlock(${NAMED_LOCK_SPACE}, ${key})`.execute(conn);
        }
      });
    } finally {
      release();
      if (this.queues.get(name) === tail) this.queues.delete(name);
    }
  }
}
