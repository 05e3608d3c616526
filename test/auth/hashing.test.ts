/**
 * argon2id computations take turns (src/core/hashing.ts): at most one per CPU at once, the rest in
 * the order they came (a queue), and a failed one (a malformed hash) gives its turn on like a finished one.
 * Many at once, as a flood of guesses or one backup-code check (ten verifications) makes, must
 * all end, right, and never more than HASHING_CONCURRENCY running.
 */
import { describe, expect, it } from 'vitest';
import { argon2Hash, argon2Verify, HASHING_CONCURRENCY, hashingLoad } from '../../src/core/hashing.js';

describe('argon2id turns', () => {
  it('runs at most one per CPU at once, all of them, and answers each right', async () => {
    const h = await argon2Hash('right');
    const n = HASHING_CONCURRENCY * 3 + 1;
    let most = 0;
    const finished: number[] = [];
    const watch = setInterval(() => {
      most = Math.max(most, hashingLoad().running);
    }, 1);
    try {
      const all = Array.from({ length: n }, (_, i) =>
        argon2Verify(h, i % 2 === 0 ? 'right' : 'wrong').then((ok) => {
          finished.push(i);
          return ok;
        }),
      );
      // All were asked for at once: the CPUs' worth run, the others wait.
      expect(hashingLoad()).toEqual({ running: HASHING_CONCURRENCY, waiting: n - HASHING_CONCURRENCY });
      const answers = await Promise.all(all);
      expect(answers).toEqual(Array.from({ length: n }, (_, i) => i % 2 === 0));
    } finally {
      clearInterval(watch);
    }
    expect(most).toBeLessThanOrEqual(HASHING_CONCURRENCY);
    expect(finished).toHaveLength(n);
    expect(hashingLoad()).toEqual({ running: 0, waiting: 0 });
  });

  it('a malformed hash is refused and gives its turn on: nothing is left holding a CPU', async () => {
    const h = await argon2Hash('right');
    const bad = Array.from({ length: HASHING_CONCURRENCY * 2 }, () =>
      argon2Verify('$argon2id$v=19$not-a-hash', 'x').then(
        () => 'accepted',
        () => 'refused',
      ),
    );
    const good = argon2Verify(h, 'right');
    expect(await Promise.all(bad)).toEqual(bad.map(() => 'refused'));
    expect(await good).toBe(true);
    expect(hashingLoad()).toEqual({ running: 0, waiting: 0 });
  });
});
