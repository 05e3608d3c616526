import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import {
  argon2Concurrency,
  argon2Hash,
  argon2Verify,
  Turns,
  threadPoolSize,
} from '../../src/core/hashing.js';

/** A piece of work that ends when the test says so. */
function gate() {
  let open!: () => void;
  let fail!: (e: Error) => void;
  const p = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { p, open, fail };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('argon2id turns', () => {
  it('runs at most `limit` at once, the rest first come first served, and a failure passes its turn on', async () => {
    const turns = new Turns(2);
    const gates = Array.from({ length: 5 }, gate);
    const started: number[] = [];
    let running = 0;
    let most = 0;
    const results = gates.map((g, i) =>
      turns.run(async () => {
        started.push(i);
        running++;
        most = Math.max(most, running);
        try {
          await g.p;
          return i;
        } finally {
          running--;
        }
      }),
    );
    await tick();
    expect(started).toEqual([0, 1]);
    gates[1]?.fail(new Error('malformed hash'));
    await expect(results[1]).rejects.toThrow('malformed hash');
    await tick();
    expect(started).toEqual([0, 1, 2]);
    gates[0]?.open();
    gates[2]?.open();
    await tick();
    expect(started).toEqual([0, 1, 2, 3, 4]);
    gates[3]?.open();
    gates[4]?.open();
    expect(await Promise.all([results[0], results[2], results[3], results[4]])).toEqual([0, 2, 3, 4]);
    expect(most).toBe(2);
    // Every turn given back, and no more: of the next three, two start at once and one waits.
    const late = [gate(), gate(), gate()];
    const order: number[] = [];
    const done = late.map((g, i) => turns.run(async () => order.push(i) && g.p));
    await tick();
    expect(order).toEqual([0, 1]);
    late[0]?.open();
    await tick();
    expect(order).toEqual([0, 1, 2]);
    for (const g of late) g.open();
    await Promise.all(done);
  });

  it('hashes and verifies through the turns', async () => {
    const h = await argon2Hash('correct horse');
    expect(h).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await Promise.all([argon2Verify(h, 'correct horse'), argon2Verify(h, 'wrong horse')])).toEqual([
      true,
      false,
    ]);
    await expect(argon2Verify('not a hash', 'x')).rejects.toThrow();
  });
});

describe('argon2id beside the rest of the service', () => {
  it('one CPU each, and one libuv thread always left for the rest', () => {
    expect(argon2Concurrency(2, 4)).toBe(2);
    expect(argon2Concurrency(16, 4)).toBe(3);
    expect(argon2Concurrency(16, 32)).toBe(16);
    expect(argon2Concurrency(1, 4)).toBe(1);
    expect(argon2Concurrency(8, 1)).toBe(1);
    expect(threadPoolSize({})).toBe(4);
    expect(threadPoolSize({ UV_THREADPOOL_SIZE: '12' })).toBe(12);
    expect(threadPoolSize({ UV_THREADPOOL_SIZE: 'lots' })).toBe(4);
    expect(threadPoolSize({ UV_THREADPOOL_SIZE: '5000' })).toBe(1024);
  });

  it('a burst of verifications does not hold a file read behind it', async () => {
    const h = await argon2Hash('burst');
    let finished = 0;
    const burst = Array.from({ length: 12 }, () => argon2Verify(h, 'wrong').finally(() => finished++));
    await readFile(import.meta.filename);
    // Read on a thread of its own: before, it queued behind every verification sent before it
    // (8 or more of 12 finished by then with libuv's 4 threads).
    const atRead = finished;
    await Promise.all(burst);
    expect(atRead).toBeLessThan(4);
  });
});

describe('admission to the argon2id queue', () => {
  it('admits at most maxAdmitted at once; a release gives one place back, once', () => {
    const turns = new Turns(1, 3);
    const held = [turns.admit(), turns.admit(), turns.admit()];
    expect(held.every((r) => typeof r === 'function')).toBe(true);
    expect(turns.admit()).toBeUndefined();
    held[0]?.();
    held[0]?.(); // a second call gives nothing more back
    const again = turns.admit();
    expect(again).toBeTypeOf('function');
    expect(turns.admit()).toBeUndefined();
    again?.();
    held[1]?.();
    held[2]?.();
    expect([turns.admit(), turns.admit(), turns.admit()].every((r) => r !== undefined)).toBe(true);
    expect(turns.admit()).toBeUndefined();
  });
});
