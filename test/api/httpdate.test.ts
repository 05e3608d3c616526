import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { httpDate } from '../../src/core/httpdate.js';

const LAST_FOUR_DIGIT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

describe('httpDate', () => {
  it('is what Date.prototype.toUTCString gives, for any time from 1970 to year 9999', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: LAST_FOUR_DIGIT_MS }), (ms) => {
        expect(httpDate(ms)).toBe(new Date(ms).toUTCString());
      }),
      { numRuns: 20_000 },
    );
  });

  it('is right on the days the calendar arithmetic turns on', () => {
    const edges = [
      Date.UTC(1970, 0, 1),
      Date.UTC(1972, 1, 29, 23, 59, 59, 999), // the first leap day after the epoch
      Date.UTC(1972, 2, 1),
      Date.UTC(2000, 1, 29), // divisible by 400: a leap year
      Date.UTC(2100, 1, 28, 23, 59, 59),
      Date.UTC(2100, 2, 1), // divisible by 100 only: no 29 February
      Date.UTC(2400, 1, 29),
      Date.UTC(2026, 11, 31, 23, 59, 59, 999),
      Date.UTC(2027, 0, 1),
      LAST_FOUR_DIGIT_MS,
    ];
    for (const ms of edges) {
      for (const t of [ms - 1, ms, ms + 1, ms + 999, ms + 1000])
        expect(httpDate(t), new Date(t).toISOString()).toBe(new Date(t).toUTCString());
    }
  });

  it('leaves times outside its range to Date, unchanged', () => {
    for (const t of [-1, -86_400_000, LAST_FOUR_DIGIT_MS + 1, Number.NaN, Number.POSITIVE_INFINITY])
      expect(httpDate(t)).toBe(new Date(t).toUTCString());
  });
});
