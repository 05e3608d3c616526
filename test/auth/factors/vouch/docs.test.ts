import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  nextState,
  STATES,
  VOUCH_TRANSITIONS,
  type VouchOp,
  type VouchRole,
} from '../../../../src/auth/factors/vouch/lifecycle.js';
import { ApiError } from '../../../../src/core/errors.js';

/** docs/signin.md's vouch lifecycle table is the code's table, row for row. */
describe('the vouch request lifecycle', () => {
  it('docs/signin.md lists exactly VOUCH_TRANSITIONS', () => {
    const md = readFileSync(new URL('../../../../docs/signin.md', import.meta.url), 'utf8');
    const section = md.slice(md.indexOf('### Lifecycle'), md.indexOf('### Reference videos'));
    const rows = section
      .split('\n')
      .filter((l) => /^\| (video|approve|decline|cancel|expire) \|/.test(l))
      .map((l) => l.split('|').map((c) => c.trim()));
    const documented = rows.map((c) => ({ op: c[1], by: (c[2] ?? '').split(' ')[0], from: c[3], to: c[4] }));
    expect(documented).toEqual(
      VOUCH_TRANSITIONS.map((t) => ({ op: t.op, by: t.by, from: t.from, to: t.to })),
    );
  });

  it('every (state, operation, role) not in the table is 409 Invalid Transition; final states take nothing', () => {
    const ops: VouchOp[] = ['video', 'approve', 'decline', 'cancel', 'expire'];
    const roles: VouchRole[] = ['requester', 'voucher', 'system'];
    fc.assert(
      fc.property(
        fc.constantFrom(...STATES),
        fc.constantFrom(...ops),
        fc.constantFrom(...roles),
        (from, op, by) => {
          const row = VOUCH_TRANSITIONS.find((t) => t.from === from && t.op === op && t.by === by);
          if (row) expect(nextState(from, op, by)).toBe(row.to);
          else {
            let err: unknown;
            try {
              nextState(from, op, by);
            } catch (e) {
              err = e;
            }
            expect(err).toBeInstanceOf(ApiError);
            expect((err as ApiError).code).toBe('Invalid Transition');
          }
          if (from !== 'pending') expect(row).toBeUndefined();
        },
      ),
    );
  });
});
