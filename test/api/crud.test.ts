import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectTypes } from '../../src/objects/registry.js';
import { backends, startTestService, type TestService } from '../helpers.js';

const HTTP_DATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** A valid body for creating each writable type in these tests. */
const SAMPLE: Record<string, Record<string, unknown>> = {
  AccountChangePlan: { Name: 'p' },
  AccountChange: { AccountName: 'x' },
  ActivationCode: { Description: 'c', Code: 'abcdef123' },
  APIKey: { Scopes: ['user'] },
  App: { Name: 'app' },
  Group: { Name: 'g' },
  Script: { Name: 's' },
  User: {},
  VirtualHost: { Upstream: 'http://localhost:9000' },
  VouchRequest: { Reason: 'r' },
};

describe.each(backends())('generic object API on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('creates a user from {} with the fields the spec shows', async () => {
    const res = await s.req({
      method: 'POST',
      url: '/users',
      payload: {},
      headers: { accept: 'application/json' },
    });
    expect(res.statusCode).toBe(201);
    expect(res.body).toBe('');
    const id = res.headers['x-id'] as string;
    // 20 letters and digits, beginning with the creation time in milliseconds (src/store/stored.ts).
    expect(id).toMatch(/^[a-z0-9]{20}$/);
    expect(Math.abs(Number.parseInt(id.slice(0, 9), 36) - Date.now())).toBeLessThan(60_000);
    expect(res.headers.location).toBe(`/users/${id}`);
    expect(res.headers.etag).toMatch(/^".+"$/);
    expect(res.headers['x-create-time']).toMatch(HTTP_DATE);
    expect(res.headers['last-modified']).toMatch(HTTP_DATE);
    const get = await s.req({ method: 'GET', url: `/users/${id}` });
    expect(get.statusCode).toBe(200);
    expect(get.headers['content-type']).toMatch(/^application\/json/);
    expect(get.headers['cache-control']).toBe('private, max-age=0');
    expect(get.headers.expires).toBe('-1');
    expect(get.headers.etag).toBe(res.headers.etag);
    expect(get.headers['x-id']).toBe(id);
    const user = get.json();
    expect(user).toMatchObject({
      ID: id,
      HavePIN: false,
      HaveTOTPSecret: false,
      Active: false,
      SuspendAfter: '0001-01-01T00:00:00Z',
      SuspendBefore: '0001-01-01T00:00:00Z',
      Name: {},
      Icon: {},
    });
    // The server's clock, within a minute.
    expect(Math.abs(Date.parse(get.headers['x-create-time'] as string) - Date.now())).toBeLessThan(60_000);
  });

  it('serves every type at its path with only its operations', async () => {
    for (const type of objectTypes) {
      const list = await s.req({ method: 'GET', url: `/${type.path}` });
      if (type.identity === 'singleton') {
        expect(list.statusCode, type.kind).toBe(200);
        expect(list.headers['x-id']).toBeUndefined();
        expect(list.headers.location).toBe('/tenant');
        for (const method of ['POST', 'DELETE'] as const) {
          const r = await s.req({ method, url: '/tenant', payload: {} });
          expect(r.statusCode, `${method} /tenant`).toBe(405);
          expect(r.headers.allow).toBe('GET, HEAD, PUT, PATCH');
        }
        continue;
      }
      expect(list.statusCode, type.kind).toBe(200);
      expect(list.headers['content-type']).toBe('application/x-json-lines');
      if (!type.ops.includes('create')) {
        const post = await s.req({ method: 'POST', url: `/${type.path}`, payload: {} });
        expect(post.statusCode, `POST /${type.path}`).toBe(405);
        expect(post.headers.allow).toBe('GET, HEAD');
        expect(post.headers['x-error-code']).toBe('Method Not Allowed');
        for (const method of ['PUT', 'DELETE'] as const) {
          const r = await s.req({
            method,
            url: `/${type.path}/x1`,
            payload: {},
            headers: { 'if-match': '"x"' },
          });
          expect(r.statusCode, `${method} /${type.path}/x1`).toBe(405);
        }
        expect((await s.req({ method: 'GET', url: `/${type.path}/nope` })).statusCode).toBe(404);
        continue;
      }
      // The five operations.
      const body = SAMPLE[type.kind] ?? {};
      const created =
        type.identity === 'named'
          ? await s.req({ method: 'POST', url: `/${type.path}/vh-${backend}.example.com`, payload: body })
          : await s.req({ method: 'POST', url: `/${type.path}`, payload: body });
      expect(created.statusCode, `${type.kind} ${created.body}`).toBe(201);
      for (const h of ['x-id', 'location', 'x-create-time', 'last-modified', 'etag'])
        expect(created.headers[h], h).toBeDefined();
      if (type.kind === 'APIKey') expect(created.json().Secret).toMatch(/^gv[A-Za-z0-9]{54}$/);
      else expect(created.body, type.kind).toBe('');
      const id = created.headers['x-id'] as string;
      expect(created.headers.location).toBe(`/${type.path}/${id}`);
      const got = await s.req({ method: 'GET', url: `/${type.path}/${id}` });
      expect(got.statusCode).toBe(200);
      const put = await s.req({
        method: 'PUT',
        url: `/${type.path}/${id}`,
        payload: got.json(),
        headers: { 'if-match': got.headers.etag as string },
      });
      expect(put.statusCode, `unchanged PUT ${type.kind}`).toBe(304);
      const listed = await s.req({ method: 'GET', url: `/${type.path}` });
      expect(listed.body).toContain(`"ID":"${id}"`);
      const del = await s.req({
        method: 'DELETE',
        url: `/${type.path}/${id}`,
        headers: { 'if-match': got.headers.etag as string },
      });
      expect(del.statusCode).toBe(204);
      expect((await s.req({ method: 'GET', url: `/${type.path}/${id}` })).statusCode).toBe(404);
    }
  });

  it('names a virtual host by the path and refuses bad names', async () => {
    const ok = await s.req({ method: 'POST', url: '/virtualhosts/vh1', payload: {} });
    expect(ok.statusCode).toBe(201);
    expect(ok.headers['x-id']).toBe('vh1');
    expect((await s.req({ method: 'GET', url: '/virtualhosts/vh1' })).statusCode).toBe(200);
    const again = await s.req({ method: 'POST', url: '/virtualhosts/vh1', payload: {} });
    expect(again.statusCode).toBe(409);
    const bad = await s.req({ method: 'POST', url: '/virtualhosts/Bad_Name!', payload: {} });
    expect(bad.statusCode).toBe(400);
    expect((await s.req({ method: 'POST', url: '/virtualhosts', payload: {} })).statusCode).toBe(405);
  });

  it('takes a virtual host upstream only as an http(s) URL without credentials, spaces or control characters; Auth empty by default', async () => {
    const made = await s.req({ method: 'POST', url: '/virtualhosts/vh2', payload: {} });
    expect(made.statusCode).toBe(201);
    const got = (await s.req({ method: 'GET', url: '/virtualhosts/vh2' })).json();
    expect(got).toMatchObject({ Upstream: '', Auth: '' });
    for (const Upstream of [
      'ftp://files.example',
      'not a url',
      'http://user:pw@app.example:8000',
      'http://app.example/a b',
      'http://app.example/\tx',
    ]) {
      const r = await s.req({ method: 'POST', url: '/virtualhosts/vh3', payload: { Upstream } });
      expect([Upstream, r.statusCode]).toEqual([Upstream, 400]);
      expect(r.json().Message).toMatch(/^Upstream /);
      expect(r.json().Message).not.toContain('pw@');
    }
    const bad = await s.req({ method: 'POST', url: '/virtualhosts/vh3', payload: { Auth: 'sometimes' } });
    expect(bad.statusCode).toBe(400);
    const ok = await s.req({
      method: 'POST',
      url: '/virtualhosts/vh3',
      payload: { Upstream: 'https://10.0.0.5:8443/app', Auth: 'none' },
    });
    expect(ok.statusCode).toBe(201);
  });

  describe('update and delete', () => {
    let id: string;
    let etag: string;
    beforeAll(async () => {
      const r = await s.req({ method: 'POST', url: '/users', payload: { Name: { FullName: 'Ada' } } });
      id = r.headers['x-id'] as string;
      etag = r.headers.etag as string;
    });

    it('answers 304 to If-None-Match with the current ETag and 200 to a stale one', async () => {
      const match = await s.req({ method: 'GET', url: `/users/${id}`, headers: { 'if-none-match': etag } });
      expect(match.statusCode).toBe(304);
      expect(match.body).toBe('');
      expect(match.headers.etag).toBe(etag);
      const stale = await s.req({
        method: 'GET',
        url: `/users/${id}`,
        headers: { 'if-none-match': '"stale"' },
      });
      expect(stale.statusCode).toBe(200);
      expect(stale.json().Name.FullName).toBe('Ada');
    });

    it('refuses PUT without If-Match (428) and changes nothing', async () => {
      const r = await s.req({ method: 'PUT', url: `/users/${id}`, payload: { Name: { FullName: 'X' } } });
      expect(r.statusCode).toBe(428);
      expect(r.headers['x-error-code']).toBe('Precondition Required');
      expect(r.json().Message).toMatch(/If-Match/);
      const get = await s.req({ method: 'GET', url: `/users/${id}` });
      expect(get.json().Name.FullName).toBe('Ada');
      expect(get.headers.etag).toBe(etag);
    });

    it('updates with the current ETag: 204, a new ETag, and the change visible', async () => {
      const get = await s.req({ method: 'GET', url: `/users/${id}` });
      const body = {
        ...get.json(),
        Name: { FullName: 'Ada Lovelace' },
        SuspendAfter: '2030-01-02T03:04:05+01:00',
      };
      const r = await s.req({
        method: 'PUT',
        url: `/users/${id}`,
        payload: body,
        headers: { 'if-match': etag },
      });
      expect(r.statusCode).toBe(204);
      expect(r.headers.etag).not.toBe(etag);
      for (const h of ['x-id', 'location', 'x-create-time', 'last-modified'])
        expect(r.headers[h]).toBeDefined();
      const after = await s.req({ method: 'GET', url: `/users/${id}` });
      expect(after.headers.etag).toBe(r.headers.etag);
      expect(after.json().Name.FullName).toBe('Ada Lovelace');
      expect(after.json().SuspendAfter).toBe('2030-01-02T02:04:05Z');
      // A stale ETag now fails and stores nothing.
      const stale = await s.req({
        method: 'PUT',
        url: `/users/${id}`,
        payload: { Name: { FullName: 'Z' } },
        headers: { 'if-match': etag },
      });
      expect(stale.statusCode).toBe(412);
      expect(stale.headers['x-error-code']).toBe('Precondition Failed');
      expect((await s.req({ method: 'GET', url: `/users/${id}` })).json().Name.FullName).toBe('Ada Lovelace');
      etag = r.headers.etag as string;
    });

    it('answers 304 to an unchanged PUT without touching Last-Modified or the ETag', async () => {
      const get = await s.req({ method: 'GET', url: `/users/${id}` });
      const r = await s.req({
        method: 'PUT',
        url: `/users/${id}`,
        payload: get.json(),
        headers: { 'if-match': etag },
      });
      expect(r.statusCode).toBe(304);
      const again = await s.req({ method: 'GET', url: `/users/${id}` });
      expect(again.headers.etag).toBe(etag);
      expect(again.headers['last-modified']).toBe(get.headers['last-modified']);
    });

    it('ignores server-managed fields on write', async () => {
      const r = await s.req({
        method: 'PUT',
        url: `/users/${id}`,
        payload: { HavePIN: true, ID: 'other' },
        headers: { 'if-match': etag },
      });
      expect(r.statusCode).toBe(204);
      const get = await s.req({ method: 'GET', url: `/users/${id}` });
      expect(get.json().HavePIN).toBe(false);
      expect(get.json().ID).toBe(id);
      etag = get.headers.etag as string;
    });

    it('answers 404 for PUT and DELETE of a missing object, before checking the ETag', async () => {
      expect(
        (await s.req({ method: 'PUT', url: '/users/unknown', payload: {}, headers: { 'if-match': '"x"' } }))
          .statusCode,
      ).toBe(404);
      expect(
        (await s.req({ method: 'DELETE', url: '/users/unknown', headers: { 'if-match': '"x"' } })).statusCode,
      ).toBe(404);
      expect((await s.req({ method: 'GET', url: '/users/unknown' })).statusCode).toBe(404);
    });

    it('deletes only with the current ETag', async () => {
      const none = await s.req({ method: 'DELETE', url: `/users/${id}` });
      expect(none.statusCode).toBe(428);
      const stale = await s.req({
        method: 'DELETE',
        url: `/users/${id}`,
        headers: { 'if-match': '"stale"' },
      });
      expect(stale.statusCode).toBe(412);
      expect((await s.req({ method: 'GET', url: `/users/${id}` })).statusCode).toBe(200);
      const ok = await s.req({ method: 'DELETE', url: `/users/${id}`, headers: { 'if-match': etag } });
      expect(ok.statusCode).toBe(204);
      expect((await s.req({ method: 'GET', url: `/users/${id}` })).statusCode).toBe(404);
    });
  });

  it('updates the tenant with If-Match: 204, 304 unchanged, 412 stale', async () => {
    const get = await s.req({ method: 'GET', url: '/tenant' });
    for (const h of ['etag', 'location', 'x-create-time', 'last-modified'])
      expect(get.headers[h]).toBeDefined();
    const etag = get.headers.etag as string;
    const same = await s.req({
      method: 'PUT',
      url: '/tenant',
      payload: get.json(),
      headers: { 'if-match': etag },
    });
    expect(same.statusCode).toBe(304);
    const changed = await s.req({
      method: 'PUT',
      url: '/tenant',
      payload: { ...(get.json() as object), Name: 'Acme' },
      headers: { 'if-match': etag },
    });
    expect(changed.statusCode).toBe(204);
    expect((await s.req({ method: 'GET', url: '/tenant' })).json().Name).toBe('Acme');
    const stale = await s.req({
      method: 'PUT',
      url: '/tenant',
      payload: { Name: 'B' },
      headers: { 'if-match': etag },
    });
    expect(stale.statusCode).toBe(412);
  });

  it('GET /users/me returns the caller and honours If-None-Match', async () => {
    const me = await s.req({ method: 'GET', url: '/users/me' });
    expect(me.statusCode).toBe(200);
    expect(me.json().ID).toBe(s.adminId);
    expect(me.headers['x-id']).toBe(s.adminId);
    const cached = await s.req({
      method: 'GET',
      url: '/users/me',
      headers: { 'if-none-match': me.headers.etag as string },
    });
    expect(cached.statusCode).toBe(304);
    const serviceKey = await s.keyFor(['admin']);
    expect((await s.req({ method: 'GET', url: '/users/me', key: serviceKey })).statusCode).toBe(404);
  });
});
