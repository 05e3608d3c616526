/** The most IDs one statement asks for; a larger gathering is read in several. */
export const MAX_IDS_PER_READ = 200;

/**
 * How many microtask hops after a gathering is answered a read asked by the code it resumed is
 * still answered at once (`sweep`): a request that reads one object after another (an access
 * check: a group, then its membership, then the next group) asks its next read a few hops after
 * its last one was answered.
 */
export const SWEEP_HOPS = 32;

interface Waiter<R> {
  resolve: (row: R | undefined) => void;
  reject: (err: unknown) => void;
}

/**
 * Reads of single objects by ID that arrive in one turn of the event loop are answered together,
 * in the turn's check phase (setImmediate), one gathering per type; a read that arrives alone is
 * answered by `one`, the others by `many`. The same serves PostgreSQL's session lookups by token
 * (src/auth/session/rows.ts), keyed by the token's hash.
 *
 * - PostgreSQL: a read by ID cost the service a round trip, and most of its CPU went to that round
 *   trip's system calls and the driver's handling of one statement, not to the row. The reads of a
 *   turn go as one statement (`id = ANY($2)`).
 * - SQLite: every read asked whether anything was committed before it trusted the row cache (one
 *   read of the wal-index header, rowcache.ts). The reads of a turn ask once, and the rows not
 *   kept are read in one statement. Measured, GET /users/:id ran 1.5 times as fast, more than
 *   the question alone cost (docs/benchmarks.md).
 *
 * A read asked by the code that a gathering's answer resumed (the next read of a request that reads
 * one object after another) does not wait for the next turn: for a few microtask hops after each
 * answer (SWEEP_HOPS) such reads are sent at once, gathered as they come. Without this, each read
 * of such a chain waited a whole turn of the event loop, which under load is a poll of every
 * socket: an access check over ten groups beside 32 connections of GETs took 23 ms instead of 2.
 *
 * Every read is answered from what the database held after it was asked for, so it sees every
 * write committed before that (a client's own write included, answered only once committed);
 * reads are not in transactions, so nothing else about their timing is promised. A statement that
 * fails fails every read it carried, each of which answers as a failed read always did (503).
 */
export class ReadBatches<R> {
  private pending = new Map<string, Map<string, Waiter<R>[]>>();
  private scheduled = false;

  /** `keyOf`: the key a row was asked for by (default: its `id`). */
  constructor(
    private readonly one: (kind: string, id: string) => Promise<R | undefined>,
    private readonly many: (kind: string, ids: string[]) => Promise<R[]>,
    private readonly keyOf: (row: R) => string = (row) => (row as { id: string }).id,
  ) {}

  get(kind: string, id: string): Promise<R | undefined> {
    // No object's ID holds NUL (PostgreSQL's text cannot): such an ID names nothing, and sent with
    // the others it would fail their statement (one request's path could fail every read of its
    // turn).
    if (id.includes('\u0000') || kind.includes('\u0000')) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      let byId = this.pending.get(kind);
      if (!byId) {
        byId = new Map();
        this.pending.set(kind, byId);
      }
      const waiters = byId.get(id);
      if (waiters) waiters.push({ resolve, reject });
      else byId.set(id, [{ resolve, reject }]);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush() {
    this.scheduled = false;
    this.send();
  }

  /** Sends what is gathered; `flush` of the turn, or a sweep after an answer. */
  private send() {
    const gathered = this.pending;
    this.pending = new Map();
    for (const [kind, byId] of gathered) {
      const ids = [...byId.keys()];
      for (let at = 0; at < ids.length; at += MAX_IDS_PER_READ) {
        const part = ids.slice(at, at + MAX_IDS_PER_READ);
        const [only] = part;
        const rows =
          part.length === 1 && only !== undefined
            ? this.one(kind, only).then((row) => (row ? [row] : []))
            : this.many(kind, part);
        rows.then(
          (found) => {
            const byRowId = new Map(found.map((row) => [this.keyOf(row), row]));
            for (const id of part) for (const w of byId.get(id) ?? []) w.resolve(byRowId.get(id));
            this.sweep(SWEEP_HOPS);
          },
          (err: unknown) => {
            for (const id of part) for (const w of byId.get(id) ?? []) w.reject(err);
            this.sweep(SWEEP_HOPS);
          },
        );
      }
    }
  }

  /**
   * Sends the reads asked meanwhile, checking once per microtask hop for `hops` hops: the code an
   * answer resumed runs in those hops. The turn's flush, still scheduled, then finds them gone.
   */
  private sweep(hops: number) {
    queueMicrotask(() => {
      if (this.pending.size > 0) this.send();
      else if (hops > 1) this.sweep(hops - 1);
    });
  }
}
