import type { LogPosition } from '../store/logposition.js';
import type { Change } from '../store/objects.js';

/**
 * Keeps the event stream from ending on an older version of an object (PostgreSQL).
 *
 * The log's order is by transaction id (src/store/logposition.ts), and a transaction gets its id
 * at its first write or row lock, not at its end. One that got its id early, then waited for an
 * object's row lock, writes that object after the lock's holder committed: its change is the
 * newer version but comes first in the log. Writers of one object are serialized by its row lock
 * and draw their sequence numbers in their last statement, so for one object sequence order is
 * version order: a change with a lower sequence number than one already delivered for the same
 * object is an older version, superseded, and is left out (every reader of the log, on every
 * instance, reads the same order and leaves out the same changes).
 *
 * What is remembered is bounded: a superseded change committed before the read that delivered
 * its successor, so its transaction id is below that read's `committedBelow`; once the reader's
 * position is past that id, nothing can be superseded by the entry any more and it is dropped.
 */
export class SupersededChanges {
  /** Object → its newest delivered sequence number and the bound after which it can go; oldest first. */
  private readonly newest = new Map<string, { seq: number; until: bigint }>();

  /** The changes of `batch` that are not older versions of ones delivered before; remembers them. */
  filter(batch: readonly Change[], committedBelow: string | undefined): Change[] {
    if (committedBelow === undefined) return [...batch];
    const until = BigInt(committedBelow);
    const out: Change[] = [];
    for (const c of batch) {
      const key = `${c.type}\u0000${c.id}`;
      const seen = this.newest.get(key);
      if (seen && seen.seq > c.seq) continue;
      // Re-inserted at the end, so the map stays ordered by `until` (reads only move forward).
      this.newest.delete(key);
      this.newest.set(key, { seq: c.seq, until });
      out.push(c);
    }
    return out;
  }

  /** Forgets what nothing after `position` can be superseded by. */
  passed(position: LogPosition) {
    const at = BigInt(position.tx);
    for (const [key, entry] of this.newest) {
      if (entry.until > at) break;
      this.newest.delete(key);
    }
  }

  /** Everything is forgotten (the reader skipped ahead without delivering). */
  clear() {
    this.newest.clear();
  }

  get size() {
    return this.newest.size;
  }
}
