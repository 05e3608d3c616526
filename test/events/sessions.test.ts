import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Session, saveSession, sessionById } from '../../src/auth/session/sessions.js';
import { type Browser, makeUser, signedIn } from '../auth/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { EventClient } from './client.js';

describe.each(backends())('GET /events with a session cookie on %s', (backend) => {
  let s: TestService;
  let base: string;
  let browser: Browser;
  let userId: string;
  const clients: EventClient[] = [];
  const cookieHeader = () => [...browser.cookies].map(([k, v]) => `${k}=${v}`).join('; ');

  beforeAll(async () => {
    s = await startTestService(backend);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    userId = await makeUser(s, { email: 'ev@example.com', password: 'correct horse battery staple 9' });
    browser = await signedIn(s, 'ev@example.com', 'correct horse battery staple 9');
  });
  afterAll(async () => {
    for (const c of clients) c.ws.terminate();
    await s?.close();
  });

  it('streams to a signed-in browser from our own origin; its integrity change ends the stream', async () => {
    const c = await EventClient.open(base, undefined, { headers: { cookie: cookieHeader(), origin: base } });
    clients.push(c);
    c.send({ Kind: 'User' });
    const users = await c.caughtUp('User');
    expect(users.map((f) => f.ID)).toContain(userId);
    expect(s.app.events.integrityChanged((p) => p.via === 'session' && p.userId === userId)).toBe(1);
    const closed = await c.waitClose();
    expect(c.frames[c.frames.length - 1]).toMatchObject({
      StatusCode: 100,
      StatusText: 'Integrity Level Changed',
    });
    expect(closed.code).toBe(1000);
  });

  it('streams Auth and OtherSession; a proven factor updates Auth, then 100 and close', async () => {
    const c = await EventClient.open(base, undefined, { headers: { cookie: cookieHeader(), origin: base } });
    clients.push(c);
    c.send({ Kind: 'Auth' });
    const auth = await c.caughtUp('Auth');
    expect(auth).toHaveLength(1);
    const sid = auth[0]?.ID as string;
    expect(auth[0]?.Item).toMatchObject({ Authorized: true, SessionID: sid, UserID: userId });
    const level = auth[0]?.Item.IntegrityLevel as number;

    c.send({ Kind: 'OtherSession' });
    const others = await c.caughtUp('OtherSession');
    expect(others.find((f) => f.ID === sid)?.Item).toMatchObject({ ID: sid, Current: true, UserID: userId });

    // Another sign-in of the same user appears; its sign-out is a deletion frame.
    const second = await signedIn(s, 'ev@example.com', 'correct horse battery staple 9');
    await c.until((x) => x.frames.some((f) => f.Kind === 'OtherSession' && f.ID !== sid && f.ID !== ''));
    const secondId = c.frames.find((f) => f.Kind === 'OtherSession' && f.ID !== sid && f.ID !== '')?.ID;
    expect(c.frames.find((f) => f.ID === secondId)?.Item).toMatchObject({ Current: false });
    expect((await second.post('/auth/signout')).statusCode).toBe(204);
    await c.until((x) => x.frames.some((f) => f.ID === secondId && Object.keys(f.Item).length === 0));
    expect(c.closed).toBeUndefined();

    // A second factor proven in this session (as a factor endpoint does): its level rises.
    const session = (await sessionById(s, sid)) as Session;
    await saveSession(s, { ...session, factors: [...session.factors, 'totp'] });
    const closed = await c.waitClose();
    // The Auth and OtherSession subscriptions update before the stream is checked (in either
    // order: they run side by side), then the 100 frame ends the stream.
    const last = c.frames[c.frames.length - 1];
    expect(last).toEqual({ ID: '', Item: {}, StatusCode: 100, StatusText: 'Integrity Level Changed' });
    const lastAuth = c.frames.findLast((f) => f.Kind === 'Auth' && f.ID === sid);
    expect(lastAuth?.Item.IntegrityLevel).toBeGreaterThan(level);
    expect(closed.code).toBe(1000);
    // The level change rotated the session token (fixation defence): sign in afresh.
    browser = await signedIn(s, 'ev@example.com', 'correct horse battery staple 9');
  });

  it('closes the stream of a session revoked from elsewhere (4001)', async () => {
    const c = await EventClient.open(base, undefined, { headers: { cookie: cookieHeader(), origin: base } });
    clients.push(c);
    c.send({ Kind: 'Auth' });
    const sid = (await c.caughtUp('Auth'))[0]?.ID as string;
    const res = await s.req({ method: 'DELETE', url: `/auth/sessions/${sid}` });
    expect(res.statusCode).toBe(204);
    const closed = await c.waitClose();
    expect(closed.code).toBe(4001);
    // Signed out: sign in again for the next tests.
    browser = await signedIn(s, 'ev@example.com', 'correct horse battery staple 9');
  });

  it('refuses a session-cookie handshake from another origin (cross-site websocket hijacking)', async () => {
    const err = (await EventClient.open(base, undefined, {
      headers: { cookie: cookieHeader(), origin: 'https://evil.example' },
    }).catch((e) => e)) as { res?: IncomingMessage; body?: string };
    expect(err.res?.statusCode).toBe(403);
    expect(JSON.parse(err.body ?? '{}')).toMatchObject({ Status: 403 });
  });

  it('delivers a session token rotated during the handshake in the 101 response', async () => {
    // As after a boost from another session: the next request of this session rotates its token.
    await sql`UPDATE sessions SET data = ${JSON.stringify({ RotatePending: true })} WHERE user_id = ${userId}`.execute(
      s.db.kysely,
    );
    const old = browser.session;
    const ws = new WebSocket(`${base.replace('http', 'ws')}/events`, {
      headers: { cookie: cookieHeader(), origin: base },
    });
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      ws.once('upgrade', resolve);
      ws.once('error', reject);
    });
    ws.terminate();
    const set = res.headers['set-cookie'] ?? [];
    const session = set.find((c) => c.startsWith('gatehouse_session='));
    expect(session).toBeDefined();
    expect(session).toMatch(/HttpOnly/);
    const token = session?.split(';')[0]?.split('=')[1];
    expect(token).not.toBe(old);
    // The new token works; the old one no longer does.
    browser.cookies.set('gatehouse_session', old as string);
    const stale = (await EventClient.open(base, undefined, {
      headers: { cookie: cookieHeader(), origin: base },
    }).catch((e) => e)) as { res?: IncomingMessage };
    expect(stale.res?.statusCode).toBe(401);
    browser.cookies.set('gatehouse_session', token as string);
    const c = await EventClient.open(base, undefined, { headers: { cookie: cookieHeader(), origin: base } });
    clients.push(c);
  });
});
