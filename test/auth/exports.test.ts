import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateSession } from '../../src/auth/session/validate.js';
import { signinLocation } from '../../src/web/returnurl.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { makeUser, signedIn } from './client.js';

describe.each(backends())('functions for other parts of the service on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('validateSession: the live session of a cookie token, undefined otherwise', async () => {
    const id = await makeUser(s, { email: 'v@example.com', password: 'validate session pw' });
    const b = await signedIn(s, 'v@example.com', 'validate session pw');
    const info = await validateSession(s, b.session as string);
    expect(info).toMatchObject({ userId: id, integrityLevel: 2, deviceId: b.device });
    expect(info?.expires.getTime()).toBeGreaterThan(Date.now());
    expect(await validateSession(s, 'A'.repeat(43))).toBeUndefined();
    expect(await validateSession(s, 'not a token')).toBeUndefined();
    await b.post('/auth/signout');
    expect(await validateSession(s, String(info?.sessionId))).toBeUndefined();
  });

  it('signinLocation builds the sign-in URL with return and intent', () => {
    const u = new URL(
      signinLocation('https://id.example.com/signin', 'https://app.example.com/x?y=1', 'a.b.c'),
    );
    expect(u.origin + u.pathname).toBe('https://id.example.com/signin');
    expect(u.searchParams.get('return')).toBe('https://app.example.com/x?y=1');
    expect(u.searchParams.get('intent')).toBe('a.b.c');
  });
});
