import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { factors } from '../../src/auth/factors/index.js';
import { User } from '../../src/objects/user.js';
import { requesterAndColleague, send, webm } from '../auth/factors/vouch/kit.js';
import { callbackUri, createProviderApp, setOAuth2, signInWith } from '../auth/federation/drive.js';
import { startUpstreamOP, type UpstreamOP } from '../auth/federation/upstream.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import {
  account,
  activationCode,
  Browser,
  freshIp,
  makeUser,
  PIN,
  PW,
  setTenant,
  signedIn,
  signIn,
  totpCode,
} from '../kit/index.js';
import { MailSink, signinLink } from '../kit/mail.js';
import { codeOf, FakeProvider } from '../kit/pstn.js';
import { PushService, Subscriber } from '../kit/push.js';
import { SoftKey } from '../kit/softkey.js';
import { addScript } from '../scripts/kit.js';

/*
 * One sign-in completion (docs/security.md): every path by which a session becomes authorized,
 * generated from the factor registry (src/auth/factors/index.ts), against every source of a deny:
 * a disabled user, a merged one, a sign-in script's Deny, a sign-in for an App the user is outside
 * the AccessGroups of, and the location policy. A factor in the registry without a driver here
 * fails the test, so a new factor cannot skip the completion unnoticed.
 *
 * Each case: the path is prepared (users, devices, pending codes) while nothing denies, the deny
 * source is switched on, the authorizing step is taken, the source is switched off again, and then
 * the session must not have gained the proof or the level: a path that stored its proof without
 * asking the completion would show it once the source is off. The location policy only lowers a
 * level (it refuses nothing), so there the session must not be authorized while it is on. A control
 * run per path (nothing denies) shows each driver does authorize.
 * Longer than ~400 lines on purpose: one driver per factor around one service with every
 * out-of-band fake (mail, phone, push, an upstream provider) it needs, generated into one matrix.
 * Finding 4 of #23 is the rows "oauth2rp/otp/mobile/vouch is denied when the deny source is
 * script": each ended authorized (or raised) before the completion.
 */

const RP = 'id.example.com';
const ORIGIN = `https://${RP}`;
const APP_URL = 'https://app.example.test';
const UPSTREAM_SECRET = 'upstream-client-secret-0123456789';

/** Registry entries that never authorize a session on their own (naming the user, reporting a place). */
const NOT_AUTHORIZING = new Set(['email', 'location']);

interface Prepared {
  userId: string;
  /** The session the path authorizes. */
  asking: Browser;
  /** The authorizing step. */
  final: () => Promise<LightMyRequestResponse>;
  /** The proof the step records ('' for a boost, which lends a level only). */
  factor: string;
  /** The level the step brings the session to. */
  level: number;
}

type Source = 'disabled' | 'merged' | 'script' | 'app' | 'location';
const SOURCES: Source[] = ['disabled', 'merged', 'script', 'app', 'location'];
const SCRIPT_DENY = 'deny-signin';

describe.each(backends())('one sign-in completion on %s', (backend) => {
  let s: TestService;
  let mail: MailSink;
  let pstn: FakeProvider;
  let push: PushService;
  let op: UpstreamOP;
  let appId: string;
  let providerApp: string;
  let nobodyGroup: string;
  let n = 0;

  beforeAll(async () => {
    mail = await MailSink.start();
    pstn = await FakeProvider.start();
    push = await PushService.start();
    s = await startTestService(backend, {
      ...mail.env,
      ...pstn.env(),
      SVC_PUSH_ENDPOINTS: push.origin,
      SVC_PUSH_SUBJECT: 'mailto:security@example.test',
      SVC_SERVER_SIGNINURL: `${ORIGIN}/signin`,
      SVC_MAIL_FROM: 'Sign-in <signin@example.test>',
    });
    // The App a sign-in is for (through its proxy's sign-in), open until a case closes it.
    const app = await s.req({ method: 'POST', url: '/apps', payload: { Name: 'Payroll', URL: APP_URL } });
    expect(app.statusCode, app.body).toBe(201);
    appId = String(app.headers['x-id']);
    expect((await s.req({ method: 'POST', url: `/apps/${appId}/proxytoken` })).statusCode).toBe(201);
    const g = await s.req({ method: 'POST', url: '/groups', payload: { Name: 'nobody-is-here' } });
    nobodyGroup = String(g.headers['x-id']);
    // Sign-in scripts deny a user whose full name says so (switched per case).
    await addScript(
      s,
      'sign-in',
      `function hook(input) {
        const n = input.User.Name;
        if (n && n.FullName === ${JSON.stringify(SCRIPT_DENY)}) return { Deny: 'held by the sign-in script' };
        return null;
      }`,
    );
    // An upstream provider for federation.
    providerApp = await createProviderApp(s, 'Corp IdP', { ClientID: 'gatehouse' }, UPSTREAM_SECRET);
    op = await startUpstreamOP([
      { client_id: 'gatehouse', client_secret: UPSTREAM_SECRET, redirect_uris: [callbackUri(providerApp)] },
    ]);
    await setOAuth2(s, providerApp, { Issuer: op.issuer });
  }, 60_000);
  afterAll(async () => {
    await s?.close();
    await op?.close();
    await mail?.close();
    await pstn?.close();
    await push?.close();
  });

  /** A fresh browser whose session signs in for the App (the proxy sent it to the sign-in pages). */
  async function forApp(): Promise<Browser> {
    const b = new Browser(s, { ip: freshIp() });
    const q = new URLSearchParams({
      app: appId,
      state: `st${(++n).toString().padStart(18, '0')}`,
      return: `${APP_URL}/.gatehouse/callback`,
    });
    const r = await b.req({ url: `/proxy/v1/signin?${q}` });
    expect(r.statusCode, r.body).toBe(302);
    return b;
  }
  async function identified(email: string): Promise<Browser> {
    const b = await forApp();
    expect((await b.post('/auth/email', { email })).statusCode).toBe(204);
    return b;
  }
  async function putUser(id: string, patch: Record<string, unknown>) {
    const u = await s.req({ url: `/users/${id}` });
    const r = await s.req({
      method: 'PUT',
      url: `/users/${id}`,
      headers: { 'if-match': String(u.headers.etag) },
      payload: { ...(u.json() as object), ...patch },
    });
    expect([204, 304], r.body).toContain(r.statusCode);
  }
  async function setApp(patch: Record<string, unknown>) {
    const a = await s.req({ url: `/apps/${appId}` });
    const r = await s.req({
      method: 'PUT',
      url: `/apps/${appId}`,
      headers: { 'if-match': String(a.headers.etag) },
      payload: { ...(a.json() as object), ...patch },
    });
    expect([204, 304], r.body).toContain(r.statusCode);
  }
  const merged = (id: string, into: string) =>
    s.store.systemPut(User, id, (doc) => (doc ? { doc: { ...doc, MergedInto: into } } : null));

  async function switchSource(src: Source, userId: string, on: boolean) {
    switch (src) {
      case 'disabled':
        return putUser(userId, { Disabled: on });
      case 'merged':
        return merged(userId, on ? 'someoneelse01' : '');
      case 'script':
        return putUser(userId, { Name: on ? { FullName: SCRIPT_DENY } : {} });
      case 'app':
        return setApp({ AccessGroups: on ? [nobodyGroup] : [] });
      case 'location':
        return setTenant(
          s,
          on
            ? { LocationLevel: 2, LocationRegions: ['Nowhere: 0,0,1'] }
            : { LocationLevel: 0, LocationRegions: [] },
          [204, 304],
        );
    }
  }

  // ---- the paths: one driver per factor of the registry that can authorize a session -----------

  const knowledge = (name: 'password' | 'pin') => async (): Promise<Prepared> => {
    const a = await account(s, { tag: name, password: name === 'password', pin: name === 'pin' });
    const b = await identified(a.email);
    const form: Record<string, string> = name === 'password' ? { password: PW } : { code: PIN };
    return { userId: a.id, asking: b, final: () => b.post(`/auth/${name}`, form), factor: name, level: 2 };
  };

  async function key(opts: ConstructorParameters<typeof SoftKey>[2], factor: string): Promise<Prepared> {
    const email = `key${++n}-${Date.now().toString(36)}@example.com`;
    const id = await makeUser(s, { email, password: PW });
    const owner = await signedIn(s, email, PW, { ip: freshIp() });
    const k = new SoftKey(RP, ORIGIN, opts);
    const start = await owner.req({ method: 'POST', url: '/auth/enroll/u2f', json: {} });
    const conf = await owner.req({
      method: 'POST',
      url: '/auth/enroll/u2f/confirm',
      json: { Credential: k.create(start.json()), Name: 'Key' },
    });
    expect(conf.statusCode, conf.body).toBe(200);
    const b = await forApp();
    const st = await b.post('/auth/u2f/start', { email });
    expect(st.statusCode, st.body).toBe(200);
    return {
      userId: id,
      asking: b,
      final: () => b.req({ method: 'POST', url: '/auth/u2f/finish', json: k.get(st.json()) }),
      factor,
      level: factor === 'u2f' ? 4 : factor === 'u2f_uv' ? 3 : 2,
    };
  }

  const DRIVERS: Record<string, () => Promise<Prepared>> = {
    password: knowledge('password'),
    pin: knowledge('pin'),
    async totp() {
      const a = await account(s, { tag: 'totp', password: false, totp: true });
      const b = await identified(a.email);
      return {
        userId: a.id,
        asking: b,
        final: async () => {
          const r = await b.post('/auth/totp', { code: totpCode(a.totp as string) });
          return r.statusCode === 403 && r.headers['x-error-code'] === 'Incorrect Credential'
            ? b.post('/auth/totp', { code: totpCode(a.totp as string, 1) })
            : r;
        },
        factor: 'totp',
        level: 2,
      };
    },
    async backup() {
      const a = await account(s, { tag: 'backup', password: false, backup: true });
      const b = await identified(a.email);
      const code = a.backup?.[0] as string;
      return {
        userId: a.id,
        asking: b,
        final: () => b.post('/auth/backup', { code }),
        factor: 'backup',
        level: 2,
      };
    },
    async activation_code() {
      const a = await account(s, { tag: 'invited', password: false, active: false });
      const code = `invite-${++n}-${Date.now().toString(36)}`;
      await activationCode(s, { Code: code, UserID: a.id });
      const b = await identified(a.email);
      return {
        userId: a.id,
        asking: b,
        final: () => b.post('/auth/activation_code', { code }),
        factor: 'activation_code',
        level: 2,
      };
    },
    async boost() {
      const a = await account(s, { tag: 'boosted' });
      const strong = await signIn(s, a, { password: true }, { level: 2 });
      const weak = await identified(a.email);
      const denied = await weak.req({ url: '/users/me' });
      expect(denied.statusCode).toBe(401);
      const intent = denied.json().Intent as string;
      return {
        userId: a.id,
        asking: weak,
        final: () => strong.req({ method: 'POST', url: '/auth/boost', json: { Intent: intent } }),
        factor: '',
        level: 2,
      };
    },
    async vouch() {
      const { requester, colleague } = await requesterAndColleague(s);
      const r = await identified(requester.email);
      expect((await r.post('/auth/password', { password: PW })).statusCode).toBe(204);
      const created = await r.post('/auth/vouch', { reason: 'lost my phone' });
      expect(created.statusCode, created.body).toBe(200);
      const v = created.json() as { ID: string; Level: number };
      expect((await send(r, 'POST', `/auth/vouch/${v.ID}/video`, webm(200_000))).statusCode).toBe(204);
      const c = await signIn(s, colleague, { password: true, totp: true }, { level: 3 });
      const video = (await c.req({ url: `/auth/vouch/${v.ID}` })).json().VideoID as string;
      return {
        userId: requester.id,
        asking: r,
        final: () => c.post(`/auth/vouch/${v.ID}/approve`, { video }),
        factor: 'vouch',
        level: v.Level,
      };
    },
    async otp() {
      const a = await account(s, { tag: 'link' });
      const owner = await signIn(s, a, { password: true }, { level: 2 });
      expect((await owner.req({ method: 'PUT', url: '/auth/enroll/otp' })).statusCode).toBe(204);
      const b = await identified(a.email);
      const before = mail.messages.length;
      const r = await b.post('/auth/otp/start');
      expect(r.statusCode, r.body).toBe(200);
      const { token } = signinLink((await mail.next(a.email, before)).raw);
      const phone = new Browser(s, { ip: freshIp() });
      return {
        userId: a.id,
        asking: b,
        final: () => phone.post('/auth/otp/finish', { token }),
        factor: 'otp',
        level: 2,
      };
    },
    async pstn() {
      const a = await account(s, { tag: 'phone' });
      const owner = await signIn(s, a, { password: true }, { level: 2 });
      const number = `+1555${String(Date.now() % 1_000_000).padStart(6, '0')}${++n % 10}`;
      let before = pstn.requests.length;
      const added = await owner.req({
        method: 'POST',
        url: '/auth/enroll/pstn',
        json: { Number: number, Mode: 'sms' },
      });
      expect(added.statusCode, added.body).toBe(201);
      const id = added.json().ID as string;
      const verify = codeOf(await pstn.next(number, before));
      const v = await owner.req({
        method: 'POST',
        url: `/auth/enroll/pstn/${id}/verify`,
        json: { Code: verify },
      });
      expect(v.statusCode, v.body).toBe(204);
      const b = await identified(a.email);
      before = pstn.requests.length;
      expect((await b.post(`/auth/pstn/${id}/start`)).statusCode).toBe(204);
      const code = codeOf(await pstn.next(number, before));
      return {
        userId: a.id,
        asking: b,
        final: () => b.post(`/auth/pstn/${id}/finish`, { code }),
        factor: 'pstn',
        level: 2,
      };
    },
    async mobile() {
      const a = await account(s, { tag: 'push' });
      const owner = await signIn(s, a, { password: true }, { level: 2 });
      const sub = new Subscriber(push.origin);
      const reg = await owner.req({
        method: 'POST',
        url: '/auth/enroll/mobile',
        json: { Name: 'Phone', Subscription: sub.toJSON() },
      });
      expect(reg.statusCode, reg.body).toBe(201);
      const b = await identified(a.email);
      const before = push.received.length;
      expect((await b.post('/auth/mobile/start')).statusCode).toBe(204);
      const msg = JSON.parse(sub.decrypt((await push.next(sub.path, before)).body)) as { Token: string };
      const number = String((await b.req({ url: '/auth/mobile' })).json().Number);
      const device = new Browser(s, { ip: freshIp() });
      return {
        userId: a.id,
        asking: b,
        final: () => device.post('/auth/mobile/approve', { token: msg.Token, number }),
        factor: 'mobile',
        level: 2,
      };
    },
    u2f: () => key({}, 'u2f'),
    u2f_uv: () => key({ synced: true }, 'u2f_uv'),
    u2f_up: () => key({ uv: false }, 'u2f_up'),
    async oauth2rp() {
      const email = `fed${++n}-${Date.now().toString(36)}@example.com`;
      const userId = await makeUser(s, { email, password: PW });
      const sub = `up-${n}`;
      op.accounts.set(sub, { sub, email, email_verified: true, name: 'Fed' });
      const linker = new Browser(s, { ip: freshIp() });
      expect((await linker.post('/auth/password', { email, password: PW })).statusCode).toBe(204);
      op.next = { account: sub };
      expect((await signInWith(linker, providerApp, { link: 'true' })).statusCode).toBe(303);
      const b = await forApp();
      return {
        userId,
        asking: b,
        final: () => {
          op.next = { account: sub };
          return signInWith(b, providerApp);
        },
        factor: 'oauth2rp',
        level: 2,
      };
    },
  };

  /** What the session holds now (POST /auth). */
  async function holds(b: Browser) {
    const r = await b.post('/auth');
    expect(r.statusCode, r.body).toBe(200);
    return r.json() as { IntegrityLevel: number; Proven: string[] };
  }

  it('every factor of the registry that can authorize a session has a path here', () => {
    const names = factors.map((f) => f.name).filter((x) => !NOT_AUTHORIZING.has(x));
    expect(names.filter((x) => !(x in DRIVERS))).toEqual([]);
  });

  const paths = factors.map((f) => f.name).filter((x) => !NOT_AUTHORIZING.has(x));

  it.each(paths)(
    'control: %s authorizes the session when nothing denies',
    async (name) => {
      const driver = DRIVERS[name];
      if (!driver) throw new Error(`no driver for ${name}`);
      const p = await driver();
      const r = await p.final();
      expect(r.statusCode, r.body).toBeLessThan(400);
      const now = await holds(p.asking);
      expect(now.IntegrityLevel).toBeGreaterThanOrEqual(p.level);
      if (p.factor) expect(now.Proven).toContain(p.factor);
      expect((await p.asking.req({ url: '/users/me' })).statusCode).toBe(200);
    },
    30_000,
  );

  const cases = paths.flatMap((p) => SOURCES.map((src) => [p, src] as const));
  it.each(cases)(
    '%s is denied when the deny source is %s',
    async (name, src) => {
      const driver = DRIVERS[name];
      if (!driver) throw new Error(`no driver for ${name}`);
      const p = await driver();
      await switchSource(src, p.userId, true);
      let r: LightMyRequestResponse;
      try {
        r = await p.final();
        if (src === 'location') {
          // The policy refuses nothing; it caps the level, so the session is not authorized.
          expect((await p.asking.req({ url: '/users/me' })).statusCode).toBe(401);
          return;
        }
      } finally {
        await switchSource(src, p.userId, false);
      }
      expect(
        r.statusCode,
        `${name} answered ${r.statusCode}: ${r.body.slice(0, 300)}`,
      ).toBeGreaterThanOrEqual(400);
      // Nothing was recorded: with the source off again, the session still lacks the proof and level.
      const now = await holds(p.asking);
      expect(now.IntegrityLevel, `${name}: the level was raised despite the ${src} deny`).toBeLessThan(
        p.level,
      );
      if (p.factor) expect(now.Proven).not.toContain(p.factor);
    },
    30_000,
  );
});
