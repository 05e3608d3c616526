/**
 * A sweep over keys read in pages (keyset order, never the whole table in memory): the keys of a
 * page that `gone` returns are dropped, and the number of rows dropped is returned. Each page is
 * judged whole, in one call, before anything is dropped: on SQLite a write holds the one
 * connection, so reads may not wait behind it. For sweeps whose keys, once gone, stay gone (IDs are
 * never reused).
 */
export async function sweepKeys(opts: {
  page: number;
  /** Up to `limit` distinct keys after `after`, in order. */
  list: (after: string, limit: number) => Promise<string[]>;
  /** The keys of a page that are gone. */
  gone: (keys: string[]) => Promise<string[]>;
  /** Drops a gone key's rows; how many. */
  drop: (key: string) => Promise<number>;
}): Promise<number> {
  let dropped = 0;
  let after = '';
  for (;;) {
    const keys = await opts.list(after, opts.page);
    for (const key of await opts.gone(keys)) dropped += await opts.drop(key);
    if (keys.length < opts.page) return dropped;
    after = keys[keys.length - 1] as string;
  }
}
