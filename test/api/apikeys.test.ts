import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';

describe.each(backends())('API keys on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('returns a 56-character gv key once, usable as Bearer and as access_token', async () => {
    const res = await s.req({ method: 'POST', url: '/apikeys', payload: { Scopes: ['admin'], Name: 'ci' } });
    expect(res.statusCode).toBe(201);
    const secret = res.json().Secret as string;
    expect(secret).toMatch(/^gv.{54}$/);
    expect(res.json().UserID).toBe(s.adminId);
    const id = res.headers['x-id'] as string;
    const get = await s.req({ method: 'GET', url: `/apikeys/${id}` });
    expect(get.body).not.toContain(secret);
    expect(get.json().Secret).toBeUndefined();
    expect(get.json().Prefix).toBe(secret.slice(0, 8));
    expect((await s.req({ method: 'GET', url: '/users/me', key: secret })).statusCode).toBe(200);
    const viaQuery = await s.req({ method: 'GET', url: `/users/me?access_token=${secret}`, key: '' });
    expect(viaQuery.statusCode).toBe(200);
    expect(viaQuery.json().ID).toBe(s.adminId);
  });

  it('answers 401 with WWW-Authenticate without credentials or with a bad key', async () => {
    const none = await s.req({ method: 'GET', url: '/users', key: '' });
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Bearer realm="gatehouse"/);
    expect(none.headers['x-error-code']).toBe('Unauthenticated');
    for (const auth of [`Bearer gv${'x'.repeat(54)}`, 'Bearer short', 'Basic Zm9vOmJhcg==', 'Bearer']) {
      const res = await s.req({ method: 'GET', url: '/users', headers: { authorization: auth } });
      expect(res.statusCode, auth).toBe(401);
      expect(res.headers['www-authenticate'], auth).toContain('invalid_token');
    }
    const wrongQuery = await s.req({
      method: 'GET',
      url: `/users?access_token=gv${'A'.repeat(54)}`,
      key: '',
    });
    expect(wrongQuery.statusCode).toBe(401);
  });

  it('stops a deleted key at once', async () => {
    const res = await s.req({ method: 'POST', url: '/apikeys', payload: { Scopes: ['audit'] } });
    const secret = res.json().Secret as string;
    expect((await s.req({ method: 'GET', url: '/users', key: secret })).statusCode).toBe(200);
    const del = await s.req({
      method: 'DELETE',
      url: `/apikeys/${res.headers['x-id']}`,
      headers: { 'if-match': res.headers.etag as string },
    });
    expect(del.statusCode).toBe(204);
    expect((await s.req({ method: 'GET', url: '/users', key: secret })).statusCode).toBe(401);
  });

  it('stops an expired key, and the keys of a disabled or suspended user', async () => {
    const past = await s.req({
      method: 'POST',
      url: '/apikeys',
      payload: { Scopes: ['admin'], ExpireTime: '2020-01-01T00:00:00Z' },
    });
    expect((await s.req({ method: 'GET', url: '/tenant', key: past.json().Secret })).statusCode).toBe(401);

    const user = await s.req({ method: 'POST', url: '/users', payload: { Email: 'k@example.com' } });
    const uid = user.headers['x-id'] as string;
    const key = await s.keyFor(['user'], uid);
    expect((await s.req({ method: 'GET', url: '/users/me', key })).statusCode).toBe(200);
    const disable = await s.req({
      method: 'PUT',
      url: `/users/${uid}`,
      payload: { Email: 'k@example.com', Disabled: true },
      headers: { 'if-match': user.headers.etag as string },
    });
    expect(disable.statusCode).toBe(204);
    expect((await s.req({ method: 'GET', url: '/users/me', key })).statusCode).toBe(401);
    const suspend = await s.req({
      method: 'PUT',
      url: `/users/${uid}`,
      payload: { Email: 'k@example.com', SuspendAfter: '2020-01-01T00:00:00Z' },
      headers: { 'if-match': disable.headers.etag as string },
    });
    expect(suspend.statusCode).toBe(204);
    expect((await s.req({ method: 'GET', url: '/users/me', key })).statusCode).toBe(401);
  });

  it('never writes a key into the logs, not even from access_token', async () => {
    const res = await s.req({ method: 'POST', url: '/apikeys', payload: { Scopes: ['audit'] } });
    const secret = res.json().Secret as string;
    await s.req({ method: 'GET', url: `/users?access_token=${secret}`, key: '' });
    await s.req({ method: 'GET', url: '/users', key: secret });
    const logs = s.logs.join('');
    expect(logs).toContain('access_token=[REDACTED]');
    expect(logs).not.toContain(secret);
    expect(logs).not.toContain(s.adminKey);
  });
});
