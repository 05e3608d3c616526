/**
 * A sweep over keys read in pages (keyset order, never the whole table in memory): every key that
 * `gone` says is gone is dropped, and the number of rows dropped is returned. Each page is judged
 * whole before anything is dropped: on SQLite a write holds the one connection, so reads may not
 * wait behind it. For sweeps whose keys, once gone, stay gone (IDs are never reused).
 */
export async function sweepKeys(opts: {
  page: number;
  /** Up to `limit` distinct keys after `after`, in order. */
  list: (after: string, limit: number) => Promise<string[]>;
  gone: (key: string) => Promise<boolean>;
  /** Drops a gone key's rows; how many. */
  drop: (key: string) => Promise<number>;
}): Promise<number> {
  let dropped = 0;
  let after = '';
  for (;;) {
    const keys = await opts.list(after, opts.page);
    const gone: string[] = [];
    for (const key of keys) if (await opts.gone(key)) gone.push(key);
    for (const key of gone) dropped += await opts.drop(key);
    if (keys.length < opts.page) return dropped;
    after = keys[keys.length - 1] as string;
  }
}
