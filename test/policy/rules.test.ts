import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expiryDue, groupSettings, locationCounts, stateOf } from '../../src/groups/lifecycle.js';
import { membershipCountsIn } from '../../src/policy/memberships.js';
import { userStanding } from '../../src/policy/users.js';

/*
 * The policy's membership and user rules (src/policy) against the rules the groups lifecycle
 * spelled out before them (src/groups/lifecycle.ts keeps its pure helpers), and the user rule
 * against its definition: generated groups,
 * memberships, sessions and users, so the one rule the App checks, the OpenID provider and
 * provisioning now use answers exactly as the access check always did.
 */
const NOW = Date.UTC(2026, 10, 27, 12, 0, 0);
const DAY = 86_400_000;
const stamp = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
const ZERO = '0001-01-01T00:00:00Z';

const when = fc.oneof(
  fc.constant(ZERO),
  fc.integer({ min: -10, max: 10 }).map((d) => stamp(NOW + d * DAY + 3600_000)),
);
const group = fc.record({
  ID: fc.constant('g1'),
  IntegrityLevel: fc.integer({ min: 0, max: 4 }),
  LocationRegions: fc.constantFrom([], ['Office: 52.3676,4.9041,25'], ['Far: -33.8688,151.2093,50']),
  ExpireUnusedDays: fc.integer({ min: 0, max: 5 }),
});
const membership = fc.option(
  fc.record({
    State: fc.constantFrom('requested', 'approved', 'active', 'rejected', 'expired', 'removed'),
    LastUsed: when,
    ActivateTime: when,
  }),
  { nil: undefined },
);
const location = fc.option(
  fc.constantFrom({ Latitude: 52.37, Longitude: 4.9 }, { Latitude: 0, Longitude: 0 }),
  { nil: undefined },
);

describe('policy rules', () => {
  it('a membership counts for a session exactly as the access check counted it', () => {
    fc.assert(
      fc.property(group, membership, fc.integer({ min: 0, max: 4 }), location, (g, m, level, at) => {
        const settings = groupSettings(g);
        const before =
          stateOf(m) === 'active' &&
          !expiryDue(settings, m, NOW) &&
          level >= settings.IntegrityLevel &&
          locationCounts(settings, at);
        expect(membershipCountsIn(g, m, { level, ...(at ? { location: at } : {}), now: NOW })).toBe(before);
      }),
      { numRuns: 2000 },
    );
  });

  it('without a session (provisioning) only the membership state and expiry count', () => {
    fc.assert(
      fc.property(group, membership, (g, m) => {
        const want = stateOf(m) === 'active' && !expiryDue(groupSettings(g), m, NOW);
        expect(membershipCountsIn(g, m, { now: NOW })).toBe(want);
      }),
      { numRuns: 1000 },
    );
  });

  it('a user may act unless disabled, merged away or suspended, with the rule that says which', () => {
    fc.assert(
      fc.property(
        fc.record({
          Disabled: fc.boolean(),
          MergedInto: fc.constantFrom('', 'u2'),
          SuspendAfter: when,
          SuspendBefore: when,
        }),
        (u) => {
          const d = userStanding(u, NOW);
          const suspended =
            (u.SuspendAfter !== ZERO && NOW >= Date.parse(u.SuspendAfter)) ||
            (u.SuspendBefore !== ZERO && NOW < Date.parse(u.SuspendBefore));
          const want = u.MergedInto
            ? 'user.merged'
            : u.Disabled
              ? 'user.disabled'
              : suspended
                ? 'user.suspended'
                : 'user.usable';
          expect(d.Rule).toBe(want);
          expect(d.Allowed).toBe(want === 'user.usable');
        },
      ),
      { numRuns: 1000 },
    );
    expect(userStanding(undefined).Rule).toBe('user.missing');
  });
});
