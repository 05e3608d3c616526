import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nowStamp } from '../../src/groups/lifecycle.js';
import { normalizeTimestamp } from '../../src/schema/fields.js';

/*
 * nowStamp skips normalizeTimestamp's parse for four-digit years (src/groups/lifecycle.ts): it must
 * give exactly what the parse gives, the instant's whole second, for every instant a Date holds,
 * including before 1970 (where the second is below the instant), the years before 1000 and those
 * past 9999.
 */
describe('nowStamp', () => {
  const slow = (ms: number) => normalizeTimestamp(new Date(ms).toISOString());

  it("is normalizeTimestamp's form of the instant, for any instant", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: -8.64e15, max: 8.64e15 }),
          fc.integer({ min: -62_200_000_000_000, max: 0 }),
        ),
        (ms) => {
          expect(nowStamp(ms)).toBe(slow(ms));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('keeps the second an instant falls in, before 1970 too', () => {
    expect(nowStamp(Date.UTC(2026, 10, 29, 16, 45, 17, 999))).toBe('2026-11-29T16:45:17Z');
    expect(nowStamp(-1)).toBe('1969-12-31T23:59:59Z');
    expect(nowStamp(Date.UTC(9999, 11, 31, 23, 59, 59, 500))).toBe('9999-12-31T23:59:59Z');
    // Year 0 (refused by the parse) and year 999, both printed with a leading zero.
    for (const ms of [-62_150_000_000_000, -30_610_000_000_000]) expect(nowStamp(ms)).toBe(slow(ms));
  });
});
