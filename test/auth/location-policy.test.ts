import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { distanceKm, insideRegions, parseRegion } from '../../src/core/regions.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, authResponse, levelOf, setTenant, signIn } from '../kit/index.js';

/**
 * The location policy (Tenant.LocationLevel, Tenant.LocationRegions; docs/signin.md): levels from
 * LocationLevel up need a location reported in the session (POST /auth/location) inside one of the
 * regions; without one, the session holds LocationLevel - 1, whatever its factors. The reported
 * position is the client's claim, so the policy can only lower a level, never raise one.
 */
const OFFICE = 'Amsterdam office: 52.3676,4.9041,25';
const HAARLEM = { lat: '52.3874', long: '4.6462' }; // about 18 km from the centre
const UTRECHT = { lat: '52.0907', long: '5.1214' }; // about 35 km from the centre

describe.each(backends())('location policy on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('two factors reach level 3 only with a location inside a region; outside, level 2', async () => {
    await setTenant(s, { LocationLevel: 3, LocationRegions: ['Elsewhere: -33.8688,151.2093,50', OFFICE] });
    try {
      const a = await account(s, { totp: true, tag: 'locpol' });
      const b = await signIn(s, a, { password: true, totp: true });
      expect(await authResponse(b)).toMatchObject({
        IntegrityLevel: 2,
        ReachableLevel: 2,
        LocationRequired: true,
      });
      expect((await b.post('/auth/location', HAARLEM)).statusCode).toBe(204);
      expect(await authResponse(b)).toMatchObject({
        IntegrityLevel: 3,
        ReachableLevel: 3,
        LocationRequired: false,
      });
      // Moving out (a new report) lowers the level at once; back in raises it again.
      expect((await b.post('/auth/location', UTRECHT)).statusCode).toBe(204);
      expect(await levelOf(b)).toBe(2);
      expect((await b.post('/auth/location', HAARLEM)).statusCode).toBe(204);
      expect(await levelOf(b)).toBe(3);
      // One factor is below the policy's level: a location changes nothing there.
      const one = await signIn(s, await account(s, { tag: 'locpol1' }), { password: true });
      expect(await authResponse(one)).toMatchObject({ IntegrityLevel: 2, LocationRequired: false });
      expect((await one.post('/auth/location', UTRECHT)).statusCode).toBe(204);
      expect(await levelOf(one)).toBe(2);
    } finally {
      await setTenant(s, { LocationLevel: 0, LocationRegions: [] });
    }
  });

  it('applies to sessions already signed in, and to what they may do (an administrator outside)', async () => {
    const admin = await account(s, { totp: true, admin: true, tag: 'locadm' });
    const b = await signIn(s, admin, { password: true, totp: true }, { level: 3 });
    expect((await b.req({ url: '/tenant' })).statusCode).toBe(200);
    await setTenant(s, { LocationLevel: 3, LocationRegions: [OFFICE] });
    try {
      expect(await levelOf(b)).toBe(2);
      const r = await b.req({ url: '/tenant' });
      expect(r.statusCode).toBe(401);
      expect(r.headers['x-error-code']).toBe('Insufficient Integrity');
      await b.post('/auth/location', UTRECHT);
      expect((await b.req({ url: '/tenant' })).statusCode).toBe(401);
      await b.post('/auth/location', HAARLEM);
      expect((await b.req({ url: '/tenant' })).statusCode).toBe(200);
    } finally {
      await setTenant(s, { LocationLevel: 0, LocationRegions: [] });
    }
    expect(await levelOf(b)).toBe(3);
  });

  it('a location never raises a level: without factors a session stays where it is', async () => {
    await setTenant(s, { LocationLevel: 2, LocationRegions: [OFFICE] });
    try {
      const a = await account(s, { tag: 'locnone' });
      const b = await signIn(s, a, {});
      await b.post('/auth/location', HAARLEM);
      expect(await levelOf(b)).toBe(1);
      await b.post('/auth/password', { password: 'correct horse battery staple' });
      expect(await levelOf(b)).toBe(2);
      await b.post('/auth/location', UTRECHT);
      expect(await levelOf(b)).toBe(1);
    } finally {
      await setTenant(s, { LocationLevel: 0, LocationRegions: [] });
    }
  });

  it('checks the settings: malformed regions and level 1 are 400', async () => {
    for (const patch of [
      { LocationRegions: ['52.3,4.9'] },
      { LocationRegions: ['91,0,10'] },
      { LocationRegions: ['0,181,10'] },
      { LocationRegions: ['0,0,0'] },
      { LocationRegions: ['x'.repeat(70) + ': 0,0,10'] },
      { LocationLevel: 1 },
      { LocationLevel: 5 },
    ]) {
      const r = await setTenant(s, patch, [400]);
      expect(r.headers['x-error-code'], JSON.stringify(patch)).toMatch(/Invalid Field|Bad Request/);
    }
  });
});

describe('regions (src/core/regions.ts)', () => {
  /** The point `km` away from (lat, long) along `bearing` degrees (spherical earth). */
  function destination(lat: number, long: number, km: number, bearing: number) {
    const R = 6371.0088;
    const r = Math.PI / 180;
    const d = km / R;
    const p1 = lat * r;
    const b = bearing * r;
    const p2 = Math.asin(Math.sin(p1) * Math.cos(d) + Math.cos(p1) * Math.sin(d) * Math.cos(b));
    const l2 =
      long * r +
      Math.atan2(Math.sin(b) * Math.sin(d) * Math.cos(p1), Math.cos(d) - Math.sin(p1) * Math.sin(p2));
    return { lat: p2 / r, long: ((l2 / r + 540) % 360) - 180 };
  }

  it('a point is inside a circle exactly when its distance is within the radius (property)', () => {
    fc.assert(
      fc.property(
        fc.double({ min: -80, max: 80, noNaN: true }),
        fc.double({ min: -179, max: 179, noNaN: true }),
        fc.integer({ min: 1, max: 2000 }),
        fc.double({ min: 0, max: 2, noNaN: true }),
        fc.double({ min: 0, max: 360, noNaN: true }),
        (lat, long, radius, factor, bearing) => {
          fc.pre(Math.abs(factor - 1) > 0.001);
          const p = destination(lat, long, radius * factor, bearing);
          const region = `R: ${lat.toFixed(6)},${long.toFixed(6)},${radius}`;
          expect(insideRegions(p.lat, p.long, [region])).toBe(factor < 1);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('parses the written form and measures known distances', () => {
    expect(parseRegion(OFFICE)).toEqual({
      name: 'Amsterdam office',
      latitude: 52.3676,
      longitude: 4.9041,
      radiusKm: 25,
    });
    expect(parseRegion('0,0,1')).toMatchObject({ name: '', radiusKm: 1 });
    // Amsterdam - Utrecht about 35 km, Amsterdam - Sydney about 16,600 km.
    expect(distanceKm(52.3676, 4.9041, 52.0907, 5.1214)).toBeCloseTo(34.5, 0);
    expect(Math.round(distanceKm(52.3676, 4.9041, -33.8688, 151.2093) / 100)).toBe(166);
    expect(insideRegions(0, 0, ['not a region'])).toBe(false);
  });
});
