import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectTypes } from '../../src/objects/registry.js';
import { backends, startTestService, type TestService } from '../helpers.js';

/** #16 item 7: the order of 404 and 428, and timestamps with fractional seconds. */
describe.each(backends())('conformance fixes on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  const writable = objectTypes.filter((t) => t.identity !== 'singleton' && t.ops.includes('update'));

  it('answers 404 before 428 for PUT and DELETE of a missing object of every type', async () => {
    expect(writable.length).toBeGreaterThan(5);
    for (const type of writable) {
      for (const method of ['PUT', 'DELETE'] as const) {
        const r = await s.req({
          method,
          url: `/${type.path}/doesnotexist0000`,
          ...(method === 'PUT' ? { payload: {} } : {}),
        });
        expect(r.statusCode, `${method} /${type.path}`).toBe(404);
      }
    }
  });

  it("still answers 428 for an existing object without If-Match, and 404 to a user key for another user's key", async () => {
    const u = await s.req({ method: 'POST', url: '/users', payload: {} });
    const id = u.headers['x-id'] as string;
    expect((await s.req({ method: 'PUT', url: `/users/${id}`, payload: {} })).statusCode).toBe(428);
    expect((await s.req({ method: 'DELETE', url: `/users/${id}` })).statusCode).toBe(428);
    // An own-only caller learns nothing about objects that are not its own: 404 either way.
    const other = await s.req({ method: 'POST', url: '/users', payload: {} });
    const userKey = await s.keyFor(['user'], other.headers['x-id'] as string);
    const adminKeys = await s.req({
      method: 'GET',
      url: `/apikeys?filter=${encodeURIComponent(`UserID = ${JSON.stringify(s.adminId)}`)}`,
    });
    const someKeyId = JSON.parse(adminKeys.body.split('\n')[0] as string).ID as string;
    const r = await s.req({ method: 'DELETE', url: `/apikeys/${someKeyId}`, key: userKey });
    expect(r.statusCode).toBe(404);
  });

  it('refuses fractional seconds with 400 and keeps whole seconds exactly', async () => {
    const u = await s.req({ method: 'POST', url: '/users', payload: {} });
    const id = u.headers['x-id'] as string;
    await fc.assert(
      fc.asyncProperty(
        fc.date({
          min: new Date('1970-01-01T00:00:00Z'),
          max: new Date('9000-01-01T00:00:00Z'),
          noInvalidDate: true,
        }),
        fc.integer({ min: 0, max: 999 }),
        async (d, ms) => {
          const whole = `${new Date(Math.floor(d.getTime() / 1000) * 1000).toISOString().slice(0, 19)}Z`;
          const sent = `${whole.slice(0, 19)}.${String(ms).padStart(3, '0')}Z`;
          const get = await s.req({ method: 'GET', url: `/users/${id}` });
          const r = await s.req({
            method: 'PUT',
            url: `/users/${id}`,
            payload: { ...(get.json() as object), SuspendAfter: sent },
            headers: { 'if-match': get.headers.etag as string },
          });
          const after = (await s.req({ method: 'GET', url: `/users/${id}` })).json();
          if (ms === 0) {
            expect([204, 304]).toContain(r.statusCode);
            expect(after.SuspendAfter).toBe(whole);
          } else {
            expect(r.statusCode).toBe(400);
            expect(r.json().Field).toBe('SuspendAfter');
            expect(after.SuspendAfter).toBe(get.json().SuspendAfter);
          }
        },
      ),
      { numRuns: 40 },
    );
    const created = await s.req({
      method: 'POST',
      url: '/users',
      payload: { SuspendBefore: '2031-02-03T04:05:06.789Z' },
    });
    expect(created.statusCode).toBe(400);
    expect(created.json().Message).toMatch(/fractional seconds/);
  });
});
