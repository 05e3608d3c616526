import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { Group } from '../../src/objects/group.js';
import type { ObjectStore } from '../../src/store/objects.js';
import { backends, readLog, twoStores } from '../helpers.js';

/*
 * An update on PostgreSQL reads the row it replaces without BEGIN or a lock, and its final
 * statement replaces the row only if the ETag is still the one read (src/store/pgwrite.ts,
 * readForReplace). These tests put another instance's write exactly between that read and the
 * rest of the write, and check that nothing is lost and every answer is what a locking write
 * would have given.
 */

/** The statements every pg client sends, while `record` is on. */
const sent: string[] = [];
let record = false;
/** Runs once, after the next unlocked read of the row `id` has returned (then cleared). */
let afterRead: { id: string; run: () => Promise<void> } | undefined;

const original = pg.Client.prototype.query;

function spy(this: pg.Client, ...args: unknown[]) {
  const text = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string })?.text ?? '');
  if (record) sent.push(text.trim().split(/\s+/).slice(0, 3).join(' '));
  const result = (original as (...a: unknown[]) => unknown).apply(this, args);
  const hook = afterRead;
  // Statements go as a config object with their values (src/store/pgstatements.ts) or as text.
  const params = (Array.isArray(args[1]) ? args[1] : (args[0] as { values?: unknown[] })?.values) as
    | unknown[]
    | undefined;
  if (
    hook &&
    result instanceof Promise &&
    /^select\b/i.test(text.trim()) &&
    !/for update/i.test(text) &&
    /from "objects"/i.test(text) &&
    params?.includes(hook.id)
  ) {
    afterRead = undefined;
    return result.then(async (r) => {
      await hook.run();
      return r;
    });
  }
  return result;
}

describe.each(backends().filter((b) => b === 'postgres'))('updates that read unlocked on %s', (backend) => {
  let a: ObjectStore;
  let b: ObjectStore;
  let close: () => Promise<void>;
  beforeAll(async () => {
    // Before the stores connect: each connection wraps the query method it finds (src/store/db.ts).
    pg.Client.prototype.query = spy as typeof pg.Client.prototype.query;
    ({ a, b, close } = await twoStores(backend));
  });
  afterAll(async () => {
    pg.Client.prototype.query = original;
    await close?.();
  });

  const status = (p: Promise<unknown>) =>
    p.then(
      () => 'written',
      (e: unknown) => (e instanceof ApiError ? e.status : e),
    );

  it('takes two statements and no BEGIN when nothing but the row changes', async () => {
    const { obj } = await a.create(Group, { Name: 'two-statements' });
    sent.length = 0;
    record = true;
    try {
      await a.update(Group, obj.id, { Name: 'two-statements', Description: 'x' }, obj.etag);
    } finally {
      record = false;
    }
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(/^select/i);
    expect(sent[1]).toMatch(/^WITH replaced AS/);
    expect(sent).not.toContain('BEGIN');
  });

  it("answers 412 when another instance's write comes between the read and the final statement", async () => {
    const { obj } = await a.create(Group, { Name: 'race-412' });
    afterRead = {
      id: obj.id,
      run: async () => {
        await b.update(Group, obj.id, { Name: 'race-412', Description: 'by b' }, obj.etag);
      },
    };
    expect(await status(a.update(Group, obj.id, { Name: 'race-412', Description: 'by a' }, obj.etag))).toBe(
      412,
    );
    expect(afterRead).toBeUndefined();
    const now = await a.get(Group, obj.id);
    expect(now?.doc.Description).toBe('by b');
    // One change for the object after its creation: b's, none of a's.
    const log = (await readLog(a)).filter((c) => c.id === obj.id);
    expect(log.map((c) => (c.data === null ? null : JSON.parse(c.data).Description))).toEqual(['', 'by b']);
  });

  it('writes on top of the other write, not over it, when the update is unconditional', async () => {
    const { obj } = await a.create(Group, { Name: 'race-star', Description: 'first' });
    afterRead = {
      id: obj.id,
      run: async () => {
        await b.update(Group, obj.id, { Name: 'race-star', Description: 'by b' }, '*');
      },
    };
    expect(await status(a.update(Group, obj.id, { Name: 'race-star', Description: 'by a' }, '*'))).toBe(
      'written',
    );
    const log = (await readLog(a)).filter((c) => c.id === obj.id);
    // Created, then b's, then a's (run again after the row moved): each once, in that order.
    expect(log.map((c) => JSON.parse(String(c.data)).Description)).toEqual(['first', 'by b', 'by a']);
    expect((await a.get(Group, obj.id))?.etag).toBe(log.at(-1)?.etag);
  });

  it('locks and checks the row again when the write needs more statements (a new unique key)', async () => {
    const { obj } = await a.create(Group, { Name: 'race-key' });
    afterRead = {
      id: obj.id,
      run: async () => {
        await b.update(Group, obj.id, { Name: 'race-key', Description: 'by b' }, obj.etag);
      },
    };
    sent.length = 0;
    record = true;
    let answer: unknown;
    try {
      answer = await status(a.update(Group, obj.id, { Name: 'race-key-renamed' }, obj.etag));
    } finally {
      record = false;
    }
    expect(answer).toBe(412);
    // BEGIN, the check that finds the row moved, then the rerun: BEGIN and a locking read.
    expect(sent.filter((s) => s === 'BEGIN')).toHaveLength(2);
    expect((await a.get(Group, obj.id))?.doc.Name).toBe('race-key');
    // The key was not taken: another group may have the new name.
    await a.create(Group, { Name: 'race-key-renamed' });
  });

  it('renames with a new unique key when nothing comes between', async () => {
    const { obj } = await a.create(Group, { Name: 'rename-alone' });
    const { obj: renamed } = await a.update(Group, obj.id, { Name: 'rename-alone-2' }, obj.etag);
    expect(renamed.doc.Name).toBe('rename-alone-2');
    expect(await status(a.create(Group, { Name: 'rename-alone-2' }))).toBe(409);
    await a.create(Group, { Name: 'rename-alone' });
  });
});
