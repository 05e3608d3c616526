import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditEventsOf } from '../../src/audit/trail.js';
import { authenticateApiKey } from '../../src/auth/apikeys.js';
import { keyCacheOf } from '../../src/auth/keycache.js';
import { sessionEventsOf } from '../../src/auth/session/sessions.js';
import { hashApiKey } from '../../src/objects/apikey.js';
import { jobsOf } from '../../src/store/service.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, signIn } from '../kit/index.js';

/*
 * One composition root (docs/architecture.md, "Module state"): a service object owns its caches,
 * event buses and background jobs, so two services in one process (here, each on its own
 * database) share none of them. Before, the key cache, the session and audit buses and the jobs
 * were the module's: one service's sign-out signalled the other's event stream.
 */

const until = async (what: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe.each(backends())('two services in one process on %s', (backend) => {
  let a: TestService;
  let b: TestService;
  beforeAll(async () => {
    a = await startTestService(backend);
    b = await startTestService(backend);
  });
  afterAll(async () => {
    await a?.close().catch(() => undefined);
    await b?.close();
  });

  it('each has its own state and jobs', () => {
    expect(a.app.service.state).toBeDefined();
    expect(a.app.service.state).not.toBe(b.app.service.state);
    expect(jobsOf(a.app.service)).not.toBe(jobsOf(b.app.service));
    // The route groups' interval jobs are the service's, by name.
    for (const s of [a, b])
      expect(jobsOf(s.app.service).names).toEqual(
        expect.arrayContaining(['membership sweep', 'script log pruning']),
      );
  });

  it("a sign-out in one reaches its own session events, not the other's", async () => {
    const seenA: { userId: string; deleted: boolean }[] = [];
    const seenB: { userId: string; deleted: boolean }[] = [];
    const onA = (ev: { userId: string; deleted: boolean }) => seenA.push(ev);
    const onB = (ev: { userId: string; deleted: boolean }) => seenB.push(ev);
    sessionEventsOf(a.app.service).on('change', onA);
    sessionEventsOf(b.app.service).on('change', onB);
    try {
      const user = await account(a);
      const browser = await signIn(a, user, { password: true });
      const out = await browser.post('/auth/signout', {});
      expect(out.statusCode, out.body).toBeLessThan(300);
      expect(seenA.some((ev) => ev.userId === user.id && ev.deleted)).toBe(true);
      expect(seenB).toEqual([]);
    } finally {
      sessionEventsOf(a.app.service).off('change', onA);
      sessionEventsOf(b.app.service).off('change', onB);
    }
  });

  it("a write in one wakes its own audit stream, not the other's", async () => {
    let heardA = 0;
    let heardB = 0;
    const onA = () => heardA++;
    const onB = () => heardB++;
    auditEventsOf(a.app.service).on('recorded', onA);
    auditEventsOf(b.app.service).on('recorded', onB);
    try {
      const r = await a.req({ method: 'POST', url: '/groups', payload: { Name: 'audited in a' } });
      expect(r.statusCode, r.body).toBe(201);
      await until(() => heardA > 0);
      expect(heardB).toBe(0);
    } finally {
      auditEventsOf(a.app.service).off('recorded', onA);
      auditEventsOf(b.app.service).off('recorded', onB);
    }
  });

  it("a key validated by one is in its key cache, not the other's", async () => {
    const key = await a.keyFor(['audit']);
    await authenticateApiKey(a.app.service, key);
    const now = Date.now();
    expect(keyCacheOf(a.app.service).get(hashApiKey(key), now)).toBeDefined();
    expect(keyCacheOf(b.app.service).get(hashApiKey(key), now)).toBeUndefined();
    expect(keyCacheOf(a.app.service)).not.toBe(keyCacheOf(b.app.service));
    // And the other service does not know the key at all (its own database).
    await expect(authenticateApiKey(b.app.service, key)).rejects.toMatchObject({ status: 401 });
  });

  it("closing one stops its jobs; the other's go on", async () => {
    let ticksA = 0;
    let ticksB = 0;
    jobsOf(a.app.service).every('test tick', 20, () => ticksA++);
    jobsOf(b.app.service).every('test tick', 20, () => ticksB++);
    await until(() => ticksA > 2 && ticksB > 2);
    await a.close();
    expect(jobsOf(a.app.service).stopped).toBe(true);
    const stoppedAt = ticksA;
    const bAt = ticksB;
    await until(() => ticksB > bAt + 3);
    expect(ticksA).toBe(stoppedAt);
    expect(jobsOf(b.app.service).stopped).toBe(false);
    // B still answers.
    expect((await b.req({ url: '/tenant' })).statusCode).toBe(200);
  });
});
