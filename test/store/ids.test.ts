import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newId } from '../../src/store/stored.js';

/*
 * Identifiers begin with their creation time so that new rows go at the end of every index keyed
 * by ID (src/store/stored.ts). What must hold: the format, the order, and that IDs made in the same
 * millisecond still differ and are not guessable from one another.
 */

/** The latest time the 9 time characters can hold. */
const LAST_MS = 36 ** 9 - 1;
const timeOf = (id: string) => Number.parseInt(id.slice(0, 9), 36);

describe('newId', () => {
  it('is 20 lowercase letters and digits, the first 9 the time in milliseconds', () => {
    const before = Date.now();
    const id = newId();
    const after = Date.now();
    expect(id).toMatch(/^[a-z0-9]{20}$/);
    expect(timeOf(id)).toBeGreaterThanOrEqual(before);
    expect(timeOf(id)).toBeLessThanOrEqual(after);
    expect(timeOf(newId(0))).toBe(0);
    expect(newId(LAST_MS).slice(0, 9)).toBe('zzzzzzzzz');
  });

  it('sorts IDs made later after IDs made earlier, byte by byte (as both databases compare keys)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: LAST_MS - 1 }),
        fc.integer({ min: 1, max: 10 ** 9 }),
        (t, later) => {
          const a = newId(t);
          const b = newId(Math.min(LAST_MS, t + later));
          expect(Buffer.compare(Buffer.from(a), Buffer.from(b))).toBe(-1);
          expect(timeOf(a)).toBe(t);
        },
      ),
    );
  });

  it('makes different IDs within one millisecond, with every character possible in each random place', () => {
    const now = Date.now();
    const ids = Array.from({ length: 20_000 }, () => newId(now));
    expect(new Set(ids).size).toBe(ids.length);
    for (let place = 9; place < 20; place++) {
      const seen = new Set(ids.map((id) => id[place]));
      expect(seen.size, `characters seen at place ${place}`).toBe(36);
    }
  });

  it('draws every random character equally often (no remainder bias)', () => {
    // 50,000 IDs: about 15,300 of each character; a plain byte % 36 makes four of them 8/7 as likely.
    const counts = new Map<string, number>();
    for (let i = 0; i < 50_000; i++)
      for (const c of newId().slice(9)) counts.set(c, (counts.get(c) ?? 0) + 1);
    const seen = [...counts.values()];
    expect(seen.length).toBe(36);
    expect(Math.max(...seen) / Math.min(...seen)).toBeLessThan(1.06);
  });
});
