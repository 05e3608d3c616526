import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';

describe.each(backends())('input validation, errors and versioning on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  const post = (payload: unknown, headers: Record<string, string> = {}) =>
    s.req({
      method: 'POST',
      url: '/users',
      payload: payload as string,
      headers: { 'content-type': 'application/json', ...headers },
    });

  it('uses one error shape with a stable X-Error-Code everywhere', async () => {
    const res = await s.req({ method: 'GET', url: '/users/nope' });
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['x-error-code']).toBe('Not Found');
    const body = res.json();
    expect(body).toMatchObject({ Status: 404, Code: 'Not Found' });
    expect(typeof body.Message).toBe('string');
    expect(body.RequestID).toBe(res.headers['x-request-id']);
  });

  it('rejects wrong types with 400 naming the field, and writes nothing', async () => {
    const before = (await s.req({ method: 'GET', url: '/users' })).body;
    const cases: [unknown, string][] = [
      [{ Active: 'yes' }, 'Active'],
      [{ Name: 'Ann' }, 'Name'],
      [{ Name: { FullName: 3 } }, 'Name.FullName'],
      [{ SuspendAfter: 'tomorrow' }, 'SuspendAfter'],
      [{ Email: 'not-an-address' }, 'Email'],
      [{ UserName: 'Bad Name' }, 'UserName'],
      [{ OtherEmails: ['a@b.c', 5] }, 'OtherEmails[1]'],
      [{ Nickname: 'x' }, 'Nickname'],
    ];
    for (const [body, field] of cases) {
      const res = await post(JSON.stringify(body));
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().Field, JSON.stringify(body)).toBe(field);
      expect(res.json().Message).toContain(field);
    }
    expect((await s.req({ method: 'GET', url: '/users' })).body).toBe(before);
  });

  it('rejects non-object bodies, malformed JSON, other content types and oversized bodies', async () => {
    expect((await post('[1,2]')).statusCode).toBe(400);
    expect((await post('"x"')).statusCode).toBe(400);
    const bad = await post('{"Name": ');
    expect(bad.statusCode).toBe(400);
    expect(bad.headers['x-error-code']).toBe('Invalid JSON');
    const text = await s.req({
      method: 'POST',
      url: '/users',
      payload: 'x=1',
      headers: { 'content-type': 'text/plain' },
    });
    expect(text.statusCode).toBe(415);
    expect(text.headers['x-error-code']).toBe('Unsupported Media Type');
    const form = await s.req({
      method: 'POST',
      url: '/users',
      payload: 'x=1',
      headers: { 'content-type': 'application/xml' },
    });
    expect(form.statusCode).toBe(415);
    const huge = await post(JSON.stringify({ Name: { FullName: 'x'.repeat(1024 * 1024 + 10) } }));
    expect(huge.statusCode).toBe(413);
    expect(huge.headers['x-error-code']).toBe('Payload Too Large');
    const long = await post(JSON.stringify({ Name: { FullName: 'x'.repeat(300) } }));
    expect(long.statusCode).toBe(400);
  });

  it('accepts a create without User-Agent or body', async () => {
    const res = await s.req({ method: 'POST', url: '/groups' });
    expect(res.statusCode).toBe(201);
  });

  it('rejects references to objects that do not exist', async () => {
    const res = await s.req({ method: 'POST', url: '/apikeys', payload: { UserID: 'nobody' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().Field).toBe('UserID');
    const g = await s.req({ method: 'POST', url: '/groups', payload: { Approvers: [s.adminId, 'ghost'] } });
    expect(g.statusCode).toBe(400);
  });

  it('answers 409 for a duplicate unique field', async () => {
    expect((await post(JSON.stringify({ Email: 'dup@example.com' }))).statusCode).toBe(201);
    const again = await post(JSON.stringify({ Email: 'DUP@example.com' }));
    expect(again.statusCode).toBe(409);
    expect(again.json().Field).toBe('Email');
  });

  it('serves v1 with or without X-Service-Api-Version and refuses others', async () => {
    const plain = await s.req({ method: 'GET', url: '/tenant' });
    const v1 = await s.req({ method: 'GET', url: '/tenant', headers: { 'x-service-api-version': 'v1' } });
    expect(v1.statusCode).toBe(200);
    expect(v1.body).toBe(plain.body);
    expect(v1.headers['x-service-api-version']).toBe('v1');
    expect(plain.headers['x-service-api-version']).toBe('v1');
    const v2 = await s.req({ method: 'GET', url: '/tenant', headers: { 'x-service-api-version': 'v2' } });
    expect(v2.statusCode).toBe(400);
    expect(v2.headers['x-error-code']).toBe('Unsupported API Version');
    expect(v2.json().Message).toContain('v1');
  });

  it('answers unknown paths with 404 in the error shape, even without credentials', async () => {
    const res = await s.req({ method: 'GET', url: '/nothing/here', key: '' });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-error-code']).toBe('Not Found');
  });

  it('serves /healthz without credentials', async () => {
    const res = await s.req({ method: 'GET', url: '/healthz', key: '' });
    expect(res.statusCode).toBe(200);
    expect(res.json().Status).toBe('ok');
  });
});
