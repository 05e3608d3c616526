import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitSecretCheck } from '../../src/core/hashing.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { Browser, makeUser } from './client.js';

/*
 * While the argon2id queue holds all the sign-in checks it can serve in bounded time, a further
 * check is answered 503 with Retry-After before anything is counted: a flood of attempts can
 * make the owner come back a second later, never spend the owner's attempts or lock them out.
 */
describe.each(backends())('sign-in checks beyond what the argon2id queue serves (%s)', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('are refused with 503 and Retry-After before they are counted', async () => {
    const email = `admission-${backend}@example.com`;
    const password = 'correct horse battery staple 1';
    await makeUser(s, { email, password });
    const b = new Browser(s);
    expect((await b.post('/auth/email', { email })).statusCode).toBe(204);

    // Take every admission there is (the queue is the process's: this file's service is alone in it).
    const held: (() => void)[] = [];
    for (let r = admitSecretCheck(); r; r = admitSecretCheck()) held.push(r);
    expect(held.length).toBeGreaterThan(0);
    try {
      // More attempts than the free ones of every counter: had any been counted, the owner
      // would be backing off below.
      for (const guess of ['wrong 1', 'wrong 2', 'wrong 3', 'wrong 4', 'wrong 5', 'wrong 6', password]) {
        const r = await b.post('/auth/password', { password: guess });
        expect(r.statusCode, r.body).toBe(503);
        expect(r.headers['retry-after']).toBe('1');
        expect(r.headers['x-error-code']).toBe('Service Unavailable');
      }
    } finally {
      for (const release of held) release();
    }
    const ok = await b.post('/auth/password', { password });
    expect(ok.statusCode, ok.body).toBe(204);
    // And every admission came back: as many as before can be taken again.
    const again: (() => void)[] = [];
    for (let r = admitSecretCheck(); r; r = admitSecretCheck()) again.push(r);
    for (const release of again) release();
    expect(again.length).toBe(held.length);
  });
});
