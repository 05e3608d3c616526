import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ListItemFrame } from '../../src/events/protocol.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import {
  type Account,
  account,
  activationCode,
  Browser,
  freshIp,
  PIN,
  PW,
  setTenant,
  signIn,
  totpCode,
} from '../kit/index.js';
import { EventClient } from './client.js';

/**
 * The Auth kind follows every change of the AuthResponse (docs/events.md): each step of each
 * factor, whether it writes the session (a proof), the user (activation, enrolment) or another
 * session (boost), reaches the stream of the session it changes as an Auth frame showing the
 * change. A session still signing in (level 1) may follow its own Auth and nothing else.
 */
describe.each(backends())('every sign-in step produces its Auth frame on %s', (backend) => {
  let s: TestService;
  let base: string;
  const clients: EventClient[] = [];

  beforeAll(async () => {
    s = await startTestService(backend);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const c of clients) c.ws.terminate();
    await s?.close();
  });

  const cookie = (b: Browser) => [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');

  /** Opens the browser's stream, subscribes to Auth; the client and the first AuthResponse. */
  async function follow(b: Browser) {
    const c = await EventClient.open(base, undefined, { headers: { cookie: cookie(b), origin: base } });
    clients.push(c);
    c.send({ Kind: 'Auth' });
    const first = await c.caughtUp('Auth');
    expect(first).toHaveLength(1);
    return { c, item: first[0]?.Item as Record<string, unknown> };
  }

  /** Waits for an Auth frame, after the ones already seen, whose item satisfies `pred`. */
  async function frame(c: EventClient, pred: (item: Record<string, unknown>) => boolean) {
    const seen = c.frames.length;
    const match = (f: ListItemFrame) => f.Kind === 'Auth' && f.ID !== '' && pred(f.Item);
    const already = c.frames.find(match);
    if (already) return already.Item;
    await c.until((x) => x.frames.slice(seen).some(match), 5000, 'the Auth frame');
    return (c.frames.find(match) as ListItemFrame).Item;
  }

  const identifiedAs = async (a: Account) => {
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/email', { email: a.email })).statusCode).toBe(204);
    return b;
  };

  it('a session that only named its user may follow its own Auth, and nothing else', async () => {
    const a = await account(s, { tag: 'ident' });
    const b = await identifiedAs(a);
    const { c, item } = await follow(b);
    expect(item).toMatchObject({ IntegrityLevel: 1, Authorized: false, UserID: a.id });
    for (const kind of ['User', 'OtherSession', 'Tenant', 'APIKey']) {
      c.send({ Kind: kind });
      await c.until((x) => x.frames.some((f) => f.Kind === kind && f.StatusCode !== undefined));
      expect(c.frames.find((f) => f.Kind === kind)?.StatusCode).toBe(403);
    }
    expect(c.frames.some((f) => f.Kind !== 'Auth' && f.StatusCode === undefined)).toBe(false);
    // A browser with no user named gets no stream at all.
    const anon = (await EventClient.open(base, undefined, { headers: { origin: base } }).catch((e) => e)) as {
      res?: { statusCode: number };
    };
    expect(anon.res?.statusCode).toBe(401);
  });

  it("streams of sessions still signing in do not use up the user's own stream quota", async () => {
    const a = await account(s, { tag: 'quota' });
    s.app.events.configure({ maxStreamsPerUser: 2 });
    try {
      // Three strangers who typed the address: each may follow its own sign-in.
      for (let i = 0; i < 3; i++) await follow(await identifiedAs(a));
      // The owner, signed in, still gets a stream.
      const owner = await signIn(s, a, { password: true }, { level: 2 });
      await follow(owner);
    } finally {
      s.app.events.configure({ maxStreamsPerUser: 32 });
    }
  });

  it('POST /auth/email naming another user ends the session it replaces: an empty frame, then 4001', async () => {
    const a = await account(s, { tag: 'email-a' });
    const other = await account(s, { tag: 'email-b' });
    const b = await identifiedAs(a);
    const { c } = await follow(b);
    expect((await b.post('/auth/email', { email: other.email })).statusCode).toBe(204);
    await frame(c, (i) => Object.keys(i).length === 0);
    expect((await c.waitClose()).code).toBe(4001);
    // The browser's new session follows the other user.
    expect((await follow(b)).item).toMatchObject({ UserID: other.id, IntegrityLevel: 1 });
  });

  const proofs: [
    string,
    { pin?: boolean; totp?: boolean; backup?: boolean },
    (a: Account) => Record<string, string>,
  ][] = [
    ['password', {}, () => ({ password: PW })],
    ['pin', { pin: true }, () => ({ code: PIN })],
    ['totp', { totp: true }, (a) => ({ code: totpCode(a.totp as string) })],
    ['backup', { backup: true }, (a) => ({ code: (a.backup as string[])[0] as string })],
  ];
  it.each(proofs)('POST /auth/%s: the new level, then the 100 frame', async (name, opts, form) => {
    const a = await account(s, { ...opts, tag: name });
    const b = await identifiedAs(a);
    const { c } = await follow(b);
    expect((await b.post(`/auth/${name}`, form(a))).statusCode).toBe(204);
    const item = await frame(c, (i) => (i.Proven as string[]).includes(name));
    expect(item.IntegrityLevel).toBe(2);
    expect(item.Authorized).toBe(true);
    await c.waitClose();
    expect(c.frames.at(-1)).toMatchObject({ StatusCode: 100 });
  });

  it('POST /auth/activation_code and POST /auth/activate: Proven, then Active (a write to the user only)', async () => {
    const a = await account(s, { password: false, active: false, tag: 'act' });
    await activationCode(s, { Code: 'join-us-4242', UserID: a.id });
    const b = await identifiedAs(a);
    const first = await follow(b);
    expect(first.item.Active).toBe(false);
    expect((await b.post('/auth/activation_code', { code: 'join-us-4242' })).statusCode).toBe(204);
    await frame(first.c, (i) => (i.Proven as string[]).includes('activation_code'));
    await first.c.waitClose(); // level 1 → 2

    const { c, item } = await follow(b);
    expect(item.Active).toBe(false);
    expect((await b.post('/auth/activate')).statusCode).toBe(204);
    expect((await frame(c, (i) => i.Active === true)).IntegrityLevel).toBe(item.IntegrityLevel);
    // The level did not change: the stream stays open.
    expect(c.closed).toBeUndefined();
  });

  it('enrolling a factor shows it among the factors left to prove', async () => {
    const a = await account(s, { tag: 'enrol' });
    const b = await signIn(s, a, { password: true }, { level: 2 });
    const { c, item } = await follow(b);
    expect(item.Factors).not.toContain('pin');
    const r = await b.req({ method: 'PUT', url: '/auth/enroll/pin', json: { PIN: '97531864' } });
    expect(r.statusCode, r.body).toBe(204);
    await frame(c, (i) => (i.Factors as string[]).includes('pin'));
    const t = await b.req({ method: 'POST', url: '/auth/enroll/totp', json: {} });
    expect(t.statusCode, t.body).toBe(200);
    const secret = t.json().Secret as string;
    const conf = await b.req({
      method: 'POST',
      url: '/auth/enroll/totp/confirm',
      json: { Code: totpCode(secret) },
    });
    expect(conf.statusCode, conf.body).toBe(204);
    await frame(c, (i) => (i.Factors as string[]).includes('totp'));
    expect(c.closed).toBeUndefined();
  });

  it('POST /auth/boost from another session: the raised session sees its new level', async () => {
    const a = await account(s, { totp: true, tag: 'boost' });
    const weak = await identifiedAs(a);
    const denied = await weak.req({ url: '/users/me' });
    expect(denied.statusCode).toBe(401);
    const intent = denied.json().Intent as string;
    const { c } = await follow(weak);
    const strong = await signIn(s, a, { password: true, totp: true }, { level: 3 });
    const r = await strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: intent } });
    expect(r.statusCode, r.body).toBe(204);
    expect((await frame(c, (i) => (i.IntegrityLevel as number) >= 2)).Authorized).toBe(true);
    await c.waitClose();
  });

  it("a change of the tenant's read level is a frame with the new RequiredLevel", async () => {
    const a = await account(s, { tag: 'tenant' });
    const b = await signIn(s, a, { password: true }, { level: 2 });
    const { c, item } = await follow(b);
    expect(item.RequiredLevel).toBe(2);
    await setTenant(s, { IntegrityRead: 1 });
    try {
      expect((await frame(c, (i) => i.RequiredLevel === 1)).Authorized).toBe(true);
    } finally {
      await setTenant(s, { IntegrityRead: 2 });
    }
    await frame(c, (i) => i.RequiredLevel === 2);
  });

  it('a step that is refused changes nothing and sends nothing', async () => {
    const a = await account(s, { tag: 'wrong' });
    const b = await identifiedAs(a);
    const { c } = await follow(b);
    const before = c.frames.length;
    expect((await b.post('/auth/password', { password: 'not it' })).statusCode).toBe(403);
    // Something that does produce a frame, to know the stream has passed the refused step.
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    await frame(c, (i) => i.IntegrityLevel === 2);
    const auth = c.frames.slice(before).filter((f) => f.Kind === 'Auth' && f.ID !== '');
    expect(auth).toHaveLength(1);
  });
});
