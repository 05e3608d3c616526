/** The most rows kept; past it the cache starts again empty (the hot set refills it at once). */
const MAX_ROWS = 5000;

/**
 * Objects' stored rows by type and ID, for reads outside a transaction on SQLite. It is exact, not
 * merely recent: every lookup first asks the database whether anything at all was committed since
 * the rows were read (`readVersion`, SQLite's data_version, a fraction of a read's cost), by this
 * process or any other, and starts again empty when so. A row read before a commit but stored
 * after it is kept only while no lookup has seen that commit; the next lookup empties the cache.
 *
 * Rows are strings as read, not parsed documents: every reader parses its own copy, so what one
 * request does with an object cannot reach another's.
 */
export class RowCache<Row> {
  private readonly rows = new Map<string, Row>();
  private version: number | undefined;

  constructor(private readonly readVersion: () => number) {}

  /** Asks the database whether anything was committed since the last question; empties the cache if so. */
  private current(): number {
    const at = this.readVersion();
    if (at !== this.version) {
      this.rows.clear();
      this.version = at;
    }
    return at;
  }

  /** The row when nothing has been committed since it was read; `at` is for `keep`. */
  lookup(kind: string, id: string): { row: Row | undefined; at: number } {
    const at = this.current();
    return { row: this.rows.get(`${kind}\u0000${id}`), at };
  }

  /**
   * The rows of `ids` when nothing has been committed since they were read, asking the database
   * once for all of them; `at` is for `keep`.
   */
  lookupMany(kind: string, ids: readonly string[]): { rows: Map<string, Row>; at: number } {
    const at = this.current();
    const rows = new Map<string, Row>();
    for (const id of ids) {
      const row = this.rows.get(`${kind}\u0000${id}`);
      if (row !== undefined) rows.set(id, row);
    }
    return { rows, at };
  }

  /** Keeps a row read after `lookup` answered `at`, unless a commit has been seen since. */
  keep(kind: string, id: string, row: Row, at: number): void {
    if (at !== this.version) return;
    if (this.rows.size >= MAX_ROWS) this.rows.clear();
    this.rows.set(`${kind}\u0000${id}`, row);
  }
}
