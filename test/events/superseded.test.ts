import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SupersededChanges } from '../../src/events/superseded.js';
import type { Change } from '../../src/store/objects.js';

const change = (id: string, tx: number, seq: number): Change => ({
  tx: String(tx),
  seq,
  type: 'Group',
  id,
  data: '{}',
  etag: `"${seq}"`,
  time: 0,
});

describe('superseded changes (src/events/superseded.ts)', () => {
  it('leaves out a change older than one delivered for the same object, and only that', () => {
    const s = new SupersededChanges();
    expect(s.filter([change('x', 100, 7), change('y', 100, 8)], '102').map((c) => c.seq)).toEqual([7, 8]);
    // x at seq 5 is older than x at 7: left out; y's newer change and z pass.
    expect(s.filter([change('x', 101, 5), change('y', 101, 9), change('z', 101, 4)], '102')).toEqual([
      change('y', 101, 9),
      change('z', 101, 4),
    ]);
    expect(s.filter([change('y', 102, 6), change('x', 102, 10)], '103')).toEqual([change('x', 102, 10)]);
  });

  it('passes everything through on SQLite (no bound), remembering nothing', () => {
    const s = new SupersededChanges();
    const batch = [change('x', 0, 2), change('x', 0, 1)];
    expect(s.filter(batch, undefined)).toEqual(batch);
    expect(s.size).toBe(0);
  });

  it('forgets an entry once the position is past every transaction that could be older than it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), fc.nat(50)), { minLength: 1, maxLength: 40 }),
        (steps) => {
          const s = new SupersededChanges();
          let tx = 1000;
          let seq = 0;
          for (const [id, gap] of steps) {
            tx += 1;
            seq += 1;
            s.filter([change(id, tx, seq)], String(tx + 1 + gap));
            // Entries whose bound the position has passed are gone; the others are kept.
            s.passed({ tx: String(tx), seq });
          }
          expect(s.size).toBeLessThanOrEqual(4);
          s.passed({ tx: String(tx + 100), seq: 0 });
          expect(s.size).toBe(0);
        },
      ),
    );
  });
});
