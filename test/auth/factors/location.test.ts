import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../../helpers.js';
import { account, authResponse, Browser, freshIp, makeUser, PW, signedIn, signIn } from '../../kit/index.js';

/**
 * The location step (src/auth/factors/location): POST /auth/location (form `lat`, `long`), the
 * position the client reports, kept on the session (`Location` {Latitude, Longitude, Time}) for
 * policies, as docs/signin.md describes it. It proves nothing and earns no level: a session made
 * by it alone is level 0. There is no secret, so no 403 Incorrect Credential and no regulation,
 * and no enrolment.
 *
 * The policy that reads it (Tenant.LocationLevel/LocationRegions) is test/auth/location-policy.test.ts.
 * Not tested, because it does not exist: any check that the reported position is true; it is
 * whatever the client says (so the policy only ever lowers a level).
 */
describe.each(backends())('location step on %s', (backend) => {
  let s: TestService;
  let n = 0;
  const email = () => `user${++n}@example.com`;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  /** The Location of the browser's current session, as GET /auth/sessions lists it. */
  const locationOf = async (b: Browser) => {
    const items = (await b.req({ url: '/auth/sessions' })).body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).Item);
    return items.find((i) => i.Current).Location;
  };

  it('POST /auth/location: 204 and kept on the session; 400 for bad numbers', async () => {
    const e = email();
    await makeUser(s, { email: e, password: PW });
    const b = await signedIn(s, e, PW);
    expect((await b.post('/auth/location', { lat: '52.37', long: '4.89' })).statusCode).toBe(204);
    expect((await b.post('/auth/location', { lat: '91', long: '0' })).statusCode).toBe(400);
    expect((await b.post('/auth/location', { lat: 'abc', long: '0' })).statusCode).toBe(400);
    const list = await b.req({ url: '/auth/sessions' });
    const item = JSON.parse(list.body.trim().split('\n')[0] as string).Item;
    expect(item.Location).toMatchObject({ Latitude: 52.37, Longitude: 4.89 });
  });

  it('an anonymous browser gets a session of level 0; the position stays with it through sign-in', async () => {
    const a = await account(s, { tag: 'loc-anon' });
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/location', { lat: '-33.8688', long: '151.2093' })).statusCode).toBe(204);
    expect(b.session).toBeDefined();
    expect(b.device).toBeDefined();
    expect(await authResponse(b)).toMatchObject({
      Authorized: false,
      IntegrityLevel: 0,
      UserID: '',
      Proven: [],
      Factors: ['email'],
    });
    await signIn(s, a, { password: true }, { browser: b, level: 2 });
    expect(await locationOf(b)).toMatchObject({ Latitude: -33.8688, Longitude: 151.2093 });
  });

  it('on a signed-in session it changes neither the level nor the token; a later report replaces the earlier', async () => {
    const e = email();
    await makeUser(s, { email: e, password: 'location test password' });
    const b = await signedIn(s, e, 'location test password', { ip: freshIp() });
    const token = b.session;
    const before = Date.now();
    expect((await b.post('/auth/location', { lat: '10', long: '20' })).statusCode).toBe(204);
    expect((await b.post('/auth/location', { lat: '11.5', long: '-20.25' })).statusCode).toBe(204);
    expect(b.session).toBe(token);
    expect(await authResponse(b)).toMatchObject({ IntegrityLevel: 2, Proven: ['password'] });
    const loc = await locationOf(b);
    expect(loc).toMatchObject({ Latitude: 11.5, Longitude: -20.25 });
    // Stored to the second (docs/api.md: timestamps in UTC with whole seconds) or finer.
    expect(Date.parse(loc.Time)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(Date.parse(loc.Time)).toBeLessThanOrEqual(Date.now());
  });

  it('coordinates: decimal numbers within ±90 / ±180, up to 12 decimals; anything else is 400 naming the field', async () => {
    const b = new Browser(s, { ip: freshIp() });
    for (const [lat, long] of [
      ['90', '-180'],
      ['-90', '180'],
      ['+1.5', '-179.999999999999'],
      ['0', '0'],
    ]) {
      const r = await b.post('/auth/location', { lat: lat as string, long: long as string });
      expect([lat, long, r.statusCode]).toEqual([lat, long, 204]);
    }
    for (const [form, field] of [
      [{ lat: '90.1', long: '0' }, 'lat'],
      [{ lat: '0', long: '180.5' }, 'long'],
      [{ lat: '1e1', long: '0' }, 'lat'],
      [{ lat: '.5', long: '0' }, 'lat'],
      [{ lat: '0x10', long: '0' }, 'lat'],
      [{ lat: 'NaN', long: '0' }, 'lat'],
      [{ lat: '1.1234567890123', long: '0' }, 'lat'],
      [{ lat: '1,5', long: '0' }, 'lat'],
      [{ lat: '0', long: '' }, 'long'],
      [{ lat: '0' }, 'long'],
      [{ lat: ['1', '2'], long: '0' }, 'lat'],
    ] as const) {
      const r = await b.post('/auth/location', form as Record<string, string | string[]>);
      expect([form, r.statusCode, r.json().Field]).toEqual([form, 400, field]);
    }
  });

  it('is a sign-in step like the others: CSRF-checked even without a session', async () => {
    const b = new Browser(s, { csrf: false, ip: freshIp() });
    const r = await b.post('/auth/location', { lat: '1', long: '1' });
    expect(r.statusCode).toBe(403);
    expect(r.headers['x-error-code']).toBe('CSRF Check Failed');
    expect(b.session).toBeUndefined();
  });
});
