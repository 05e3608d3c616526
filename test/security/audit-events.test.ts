/**
 * Second-afternoon audit of the event stream (GET /events): the same classes of bug as the named
 * findings (every wait and size has a bound; secrets never leave the service), in a place nobody
 * named.
 *
 * 1. Unbounded streams per credential: any user key could open websockets without limit, each
 *    with up to 64 subscriptions, and every subscription's snapshot is read whole into memory.
 * 2. Unbounded snapshot reads: with own-only access (scope user) the snapshot of User, APIKey,
 *    Membership or VouchRequest read every row of the type (every user's keys) and filtered in
 *    JavaScript, so one user key made the service hold the whole table per subscription.
 * 3. Revocation that did not reach open streams: an administrator's session stream kept its
 *    admin subscriptions (every API key, user, app...) after the user was demoted (Admin false);
 *    only deletion, disabling and suspension ended it.
 *    Likewise a raised tenant level (IntegrityRead, IntegrityAdmin) left the session streams
 *    below it open.
 * 4. Regression: no frame carries a secret or its hash (API keys, activation codes, proxy tokens).
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_OPTIONS } from '../../src/events/hub.js';
import { takeSnapshot } from '../../src/events/snapshot.js';
import { makeUser, signedIn } from '../auth/client.js';
import { EventClient } from '../events/client.js';
import { create, person } from '../groups/fixture.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { setTenant } from '../kit/index.js';

describe.each(backends())('event stream, second afternoon, on %s', (backend) => {
  let s: TestService;
  let base: string;
  const open: EventClient[] = [];
  const connect = async (key: string) => {
    const c = await EventClient.open(base, key);
    open.push(c);
    return c;
  };
  beforeAll(async () => {
    s = await startTestService(backend);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const c of open) c.ws.terminate();
    await s?.close();
  });

  it('one user may hold only a bounded number of streams; the next is refused with 429, others are not', async () => {
    expect(DEFAULT_OPTIONS.maxStreamsPerUser).toBeGreaterThan(0);
    expect(DEFAULT_OPTIONS.maxStreamsPerUser).toBeLessThanOrEqual(64);
    const limit = 3;
    s.app.events.configure({ maxStreamsPerUser: limit });
    try {
      const u = await person(s, 'Streamer');
      // Two keys of the same user share the bound (a user holds it, not a key).
      const second = await s.keyFor(['user'], u.id);
      const held = [];
      for (let i = 0; i < limit; i++) held.push(await connect(i % 2 === 0 ? u.key : second));
      for (const key of [u.key, second]) {
        const refused = (await connect(key).catch((e) => e)) as {
          res?: { statusCode: number; headers: Record<string, string> };
        };
        expect(refused.res?.statusCode).toBe(429);
        expect(refused.res?.headers['x-error-code']).toBe('Too Many Requests');
      }
      // Another user is not affected; a closed stream frees its place.
      const other = await person(s, 'Bystander');
      await connect(other.key);
      const first = held[0] as EventClient;
      first.ws.close();
      await first.until((c) => c.closed !== undefined, 5000, 'close');
      await new Promise((r) => setTimeout(r, 50));
      const again = await connect(u.key);
      again.send({ Kind: 'User' });
      await again.caughtUp('User');
    } finally {
      s.app.events.configure({ maxStreamsPerUser: DEFAULT_OPTIONS.maxStreamsPerUser });
    }
  });

  it('handshakes racing past the check are closed: at most the bound stay open', async () => {
    const limit = 2;
    s.app.events.configure({ maxStreamsPerUser: limit });
    try {
      const u = await person(s, 'Racer');
      const tries = await Promise.allSettled(Array.from({ length: 8 }, () => connect(u.key)));
      const opened = tries.flatMap((t) => (t.status === 'fulfilled' ? [t.value] : []));
      await new Promise((r) => setTimeout(r, 200));
      const live = opened.filter((c) => c.closed === undefined);
      expect(live.length).toBe(limit);
      for (const c of opened.filter((o) => o.closed !== undefined)) expect(c.closed?.code).toBe(1008);
    } finally {
      s.app.events.configure({ maxStreamsPerUser: DEFAULT_OPTIONS.maxStreamsPerUser });
    }
  });

  it("an own-only snapshot reads the caller's rows only, not every user's", async () => {
    const others: { id: string }[] = [];
    for (let i = 0; i < 40; i++) others.push(await person(s, `Other${i}`));
    const me = await person(s, 'Reader');
    const read: number[] = [];
    s.app.events.snapshot = async (...args) => {
      const snap = await takeSnapshot(...args);
      read.push(snap.rows.length);
      return snap;
    };
    try {
      const c = await connect(me.key);
      for (const kind of ['APIKey', 'User', 'Membership']) {
        c.send({ Kind: kind });
        const frames = await c.caughtUp(kind);
        if (kind === 'APIKey') expect(frames.map((f) => f.Item.UserID)).toEqual([me.id]);
        if (kind === 'User') expect(frames.map((f) => f.ID)).toEqual([me.id]);
      }
      // One key, one user, no membership: what was read is what was sent.
      expect(read).toEqual([1, 1, 0]);
      // All access (an administrator) still reads every row.
      const admin = await connect(s.adminKey);
      admin.send({ Kind: 'APIKey' });
      const all = await admin.caughtUp('APIKey');
      expect(all.length).toBeGreaterThan(others.length);
      // A change to someone else's key still never reaches the own-only stream.
      const n = c.frames.length;
      await s.req({
        method: 'DELETE',
        url: `/apikeys/${(all.find((f) => f.Item.UserID === others[0]?.id) as { ID: string }).ID}`,
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(c.frames.slice(n).filter((f) => f.Kind === 'APIKey')).toEqual([]);
    } finally {
      s.app.events.snapshot = takeSnapshot;
    }
  });

  it("a demoted administrator's session stream ends at once and receives nothing more", async () => {
    // Administrators with one factor (password) for this test: IntegrityAdmin 2.
    await setTenant(s, { IntegrityAdmin: 2 });
    const email = 'demoted-admin@example.com';
    const password = 'pw-demoted-admin-long-enough';
    const id = await makeUser(s, { email, password, admin: true });
    const b = await signedIn(s, email, password);
    const cookie = [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const c = await EventClient.open(base, undefined, { headers: { cookie, origin: base } });
    open.push(c);
    c.send({ Kind: 'APIKey' });
    await c.caughtUp('APIKey');
    const user = await s.req({ url: `/users/${id}` });
    const demote = await s.req({
      method: 'PUT',
      url: `/users/${id}`,
      headers: { 'if-match': String(user.headers.etag) },
      payload: { ...(user.json() as Record<string, unknown>), Admin: false },
    });
    expect(demote.statusCode, demote.body).toBe(204);
    await c.until((cl) => cl.closed !== undefined, 5000, 'the close after the demotion');
    expect(c.closed?.code).toBe(4001);
    const n = c.frames.length;
    const stranger = await person(s, 'Stranger');
    await new Promise((r) => setTimeout(r, 200));
    expect(c.frames.slice(n).map((f) => f.Item.UserID)).not.toContain(stranger.id);
  });

  it('a raised tenant integrity level ends the session streams below it, and only those', async () => {
    const email = 'level-two@example.com';
    const password = 'pw-level-two-long-enough';
    await makeUser(s, { email, password });
    const b = await signedIn(s, email, password); // password: level 2
    const cookie = [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const c = await EventClient.open(base, undefined, { headers: { cookie, origin: base } });
    open.push(c);
    c.send({ Kind: 'Group' });
    await c.caughtUp('Group');
    const keyed = await connect((await person(s, 'KeyHolder')).key);
    // 304: already that level.
    const setRead = (level: number) => setTenant(s, { IntegrityRead: level }, [204, 304]);
    // A change that leaves the stream's level enough closes nothing.
    await setRead(2);
    await new Promise((r) => setTimeout(r, 200));
    expect(c.closed).toBeUndefined();
    try {
      await setRead(3);
      await c.until((cl) => cl.closed !== undefined, 5000, 'the close after IntegrityRead 3');
      expect(c.closed?.code).toBe(4001);
      // API keys have no integrity level: their streams stay.
      await new Promise((r) => setTimeout(r, 100));
      expect(keyed.closed).toBeUndefined();
    } finally {
      await setRead(2);
    }
  });

  it('regression: no frame carries a secret or its hash (API keys, activation codes, proxy tokens)', async () => {
    const c = await connect(s.adminKey);
    for (const kind of ['APIKey', 'ActivationCode', 'App']) {
      c.send({ Kind: kind });
      await c.caughtUp(kind);
    }
    const n = c.frames.length;
    const key = await s.req({ method: 'POST', url: '/apikeys', payload: { Scopes: ['audit'] } });
    expect(key.statusCode, key.body).toBe(201);
    const code = 'activation-code-0123456789';
    const ac = await s.req({ method: 'POST', url: '/activationcodes', payload: { Code: code } });
    expect(ac.statusCode, ac.body).toBe(201);
    const app = await create(s, 'apps', { Name: 'frames' });
    const tok = await s.req({ method: 'POST', url: `/apps/${app}/proxytoken` });
    expect(tok.statusCode, tok.body).toBe(201);
    const secrets = [String(key.json().Secret), code, String(tok.json().Token)];
    await c.until((cl) => cl.frames.slice(n).length >= 4, 5000, 'frames of the writes');
    await new Promise((r) => setTimeout(r, 200));
    const text = JSON.stringify(c.frames.slice(n));
    for (const secret of secrets) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(createHash('sha256').update(secret).digest('base64url'));
    }
    expect(text).not.toMatch(/Hash"/);
  });
});
