import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { User } from '../../../src/objects/user.js';
import { EventClient } from '../../events/client.js';
import { backends, startTestService, type TestService } from '../../helpers.js';
import {
  type Account,
  account,
  authResponse,
  Browser,
  freshIp,
  HTTP_DATE,
  levelOf,
  secretOf,
  signIn,
} from '../../kit/index.js';
import { decodedBody, MailSink, signinLink } from '../../kit/mail.js';

const SIGNIN = 'https://id.example.test/signin';
const UA =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/**
 * The e-mail link (src/auth/factors/otp, docs/signin.md "E-mail links"), sent through a real SMTP
 * server started here; every link is taken from the received message.
 */
describe.each(backends())('e-mail link on %s', (backend) => {
  let s: TestService;
  let mail: MailSink;

  beforeAll(async () => {
    mail = await MailSink.start();
    s = await startTestService(backend, {
      ...mail.env,
      SVC_SERVER_SIGNINURL: SIGNIN,
      SVC_MAIL_FROM: 'Sign-in <signin@example.test>',
    });
  });
  afterAll(async () => {
    await s?.close();
    await mail?.close();
  });

  /** An account with e-mail links turned on (by its own signed-in session, as the settings page does). */
  async function linkAccount(tag: string, other?: string): Promise<Account> {
    const a = await account(s, { tag });
    if (other) {
      const u = await s.req({ url: `/users/${a.id}` });
      const put = await s.req({
        method: 'PUT',
        url: `/users/${a.id}`,
        headers: { 'if-match': String(u.headers.etag) },
        payload: { ...(u.json() as object), OtherEmails: [other] },
      });
      expect(put.statusCode, put.body).toBe(204);
    }
    const b = await signIn(s, a, { password: true }, { level: 2 });
    const r = await b.req({ method: 'PUT', url: '/auth/enroll/otp' });
    expect(r.statusCode, r.body).toBe(204);
    return a;
  }

  /** A browser (its own address and User-Agent) that named the user and asked for a link. */
  async function asked(a: Account, form: Record<string, string> = {}) {
    const b = new Browser(s, { ip: freshIp() });
    const e = await b.req({
      method: 'POST',
      url: '/auth/email',
      form: { email: a.email },
      headers: { 'user-agent': UA },
    });
    expect(e.statusCode).toBe(204);
    const before = mail.messages.length;
    const r = await b.req({
      method: 'POST',
      url: '/auth/otp/start',
      form,
      headers: { host: 'evil.example' },
    });
    expect(r.statusCode, r.body).toBe(200);
    const msg = await mail.next(form.email ?? a.email, before);
    return { b, r, msg, link: signinLink(msg.raw) };
  }

  it('turning links on is a credential change: step-up for a session, never a plain API key', async () => {
    const a = await account(s, { tag: 'otp-enrol' });
    const key = await s.keyFor(['user'], a.id);
    const viaKey = await s.req({ method: 'PUT', url: '/auth/enroll/otp', key });
    expect(viaKey.statusCode).toBe(403);
    const weak = new Browser(s, { ip: freshIp() });
    await weak.post('/auth/email', { email: a.email });
    const refused = await weak.req({ method: 'PUT', url: '/auth/enroll/otp' });
    expect(refused.statusCode).toBe(401);
    expect(refused.json().Intent).toEqual(expect.any(String));
    // Not on yet: asking for a link is a conflict, and no message goes out.
    const before = mail.messages.length;
    expect((await weak.post('/auth/otp/start')).statusCode).toBe(409);
    const b = await signIn(s, a, { password: true }, { level: 2 });
    expect((await b.req({ url: '/auth/enroll/otp' })).json()).toEqual({
      Enabled: false,
      Addresses: [a.email],
    });
    expect((await b.req({ method: 'PUT', url: '/auth/enroll/otp' })).statusCode).toBe(204);
    expect((await b.req({ url: '/auth/enroll/otp' })).json()).toMatchObject({ Enabled: true });
    expect(mail.messages.length).toBe(before);
    // Now the user has a second kind of factor: the sign-in aims for two factors.
    expect((await authResponse(b)).ReachableLevel).toBe(3);
    // Turning it off needs what the factors now prove (level 3): the password session is not enough.
    expect((await b.req({ method: 'DELETE', url: '/auth/enroll/otp' })).statusCode).toBe(401);
  });

  it("sends the link to the user's address; another device approves it without being signed in", async () => {
    const a = await linkAccount('otp-flow');
    const { b, r, msg, link } = await asked(a);
    expect(r.json()).toMatchObject({
      Email: expect.stringMatching(/^o•••@example\.com$/),
      ExpireTime: expect.any(String),
    });
    expect(msg.from).toBe('signin@example.test');
    // The link points at the configured sign-in pages, whatever Host the asking request sent.
    expect(link.url.startsWith(`${SIGNIN}/otp#`)).toBe(true);
    expect(decodedBody(msg.raw)).not.toContain('evil.example');
    expect(decodedBody(msg.raw)).toContain('Chrome 131 on Linux');

    const phone = new Browser(s, { ip: freshIp() });
    const seen = await phone.post('/auth/otp/inspect', { token: link.token });
    expect(seen.statusCode, seen.body).toBe(200);
    expect(seen.json()).toMatchObject({
      Email: a.email,
      SentTo: a.email,
      SameDevice: false,
      Device: { Browser: 'Chrome 131 on Linux', UserAgent: UA, Address: b.opts.ip },
    });
    // Inspecting spends nothing; approving raises the asking session, not the phone.
    expect((await phone.post('/auth/otp/finish', { token: link.token })).statusCode).toBe(204);
    expect(phone.session).toBeUndefined();
    expect((await authResponse(phone)).UserID).toBe('');
    const st = await authResponse(b);
    expect(st.Proven).toContain('otp');
    expect(st.IntegrityLevel).toBe(2);
    // Single use.
    expect((await phone.post('/auth/otp/finish', { token: link.token })).statusCode).toBe(403);
    expect((await phone.post('/auth/otp/inspect', { token: link.token })).statusCode).toBe(403);
  });

  it('with the password: two factors; the level changed elsewhere, so the asking browser gets a new token', async () => {
    const a = await linkAccount('otp-two');
    const { b, link } = await asked(a);
    expect((await b.post('/auth/password', { password: 'correct horse battery staple' })).statusCode).toBe(
      204,
    );
    const token = b.session;
    expect(
      (await new Browser(s, { ip: freshIp() }).post('/auth/otp/finish', { token: link.token })).statusCode,
    ).toBe(204);
    expect(await levelOf(b)).toBe(3);
    expect(b.session).not.toBe(token);
  });

  it('email picks another verified address of the user; any other address is 400 and sends nothing', async () => {
    const other = `second-${Date.now()}@example.org`;
    const a = await linkAccount('otp-other', other);
    const { link } = await asked(a, { email: other });
    expect(link.token).toMatch(/\./);
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    const before = mail.messages.length;
    const r = await b.post('/auth/otp/start', { email: 'attacker@example.net' });
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({ Field: 'email' });
    expect(mail.messages.length).toBe(before);
    // Nobody named yet: 400 too.
    expect((await new Browser(s, { ip: freshIp() }).post('/auth/otp/start')).statusCode).toBe(400);
  });

  it('"This was not me" ends the asking session and spends the link', async () => {
    const a = await linkAccount('otp-refuse');
    const { b, link } = await asked(a);
    const phone = new Browser(s, { ip: freshIp() });
    expect((await phone.post('/auth/otp/refuse', { token: link.token })).statusCode).toBe(204);
    expect((await authResponse(b)).UserID).toBe('');
    expect((await phone.post('/auth/otp/finish', { token: link.token })).statusCode).toBe(403);
    expect(s.logs.some((l) => l.includes('refused by the mailbox owner'))).toBe(true);
  });

  it('an expired link is 403 and raises nothing', async () => {
    const a = await linkAccount('otp-expiry');
    const { b, link } = await asked(a);
    await s.store.systemPut(User, a.id, (doc, sec) => {
      const links = (sec.OtpLinks as unknown as { Expires: number }[]).map((l) => ({
        ...l,
        Expires: Date.now() - 1,
      }));
      return doc ? { doc, secret: { ...sec, OtpLinks: links as never } } : null;
    });
    expect(
      (await new Browser(s, { ip: freshIp() }).post('/auth/otp/finish', { token: link.token })).statusCode,
    ).toBe(403);
    expect(await levelOf(b)).toBe(1);
  });

  it('stores only a hash of each link and never logs it', async () => {
    const a = await linkAccount('otp-hash');
    const { link } = await asked(a);
    const secretPart = link.token.split('.')[1] as string;
    const stored = JSON.stringify(await secretOf(s, a.id));
    expect(stored).toContain('OtpLinks');
    expect(stored).not.toContain(secretPart);
    expect(s.logs.join('\n')).not.toContain(secretPart);
  });

  it('wrong, malformed and foreign tokens are 403, then 429 + X-Next-Attempt for that address, never holding up the owner', async () => {
    const a = await linkAccount('otp-guess');
    const { b, link } = await asked(a);
    const attacker = new Browser(s, { ip: freshIp() });
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 80 }),
          fc.stringMatching(/^[A-Za-z0-9_-]{43}$/).map((x) => `${a.id}.${x}`),
          fc.constant(`${a.id}.${'A'.repeat(43)}`),
        ),
        async (token) => {
          fc.pre(token.trim() !== '' && token !== link.token);
          const r = await attacker.post('/auth/otp/finish', { token });
          expect([403, 429]).toContain(r.statusCode);
          if (r.statusCode === 429) expect(r.headers['x-next-attempt']).toMatch(HTTP_DATE);
        },
      ),
      { numRuns: 12 },
    );
    // Forged tokens cost the client address (their 256-bit secret is not guessable): it is held
    // up after the address policy's free attempts...
    let held = await attacker.post('/auth/otp/finish', { token: `${a.id}.${'B'.repeat(43)}` });
    for (let i = 0; i < 30 && held.statusCode === 403; i++)
      held = await attacker.post('/auth/otp/finish', { token: `${a.id}.${'B'.repeat(43)}` });
    expect(held.statusCode).toBe(429);
    expect(held.headers['x-next-attempt']).toMatch(HTTP_DATE);
    expect(await levelOf(b)).toBe(1);
    // ...but not the user: the owner's real link still works from elsewhere.
    expect(
      (await new Browser(s, { ip: freshIp() }).post('/auth/otp/finish', { token: link.token })).statusCode,
    ).toBe(204);
  });

  it('limits how many links a user and an address can be sent (429 + X-Next-Attempt)', async () => {
    const a = await linkAccount('otp-limit');
    for (let i = 0; i < 3; i++) await asked(a);
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    const before = mail.messages.length;
    const r = await b.post('/auth/otp/start');
    expect(r.statusCode).toBe(429);
    expect(r.headers['x-next-attempt']).toMatch(HTTP_DATE);
    expect(mail.messages.length).toBe(before);
  });

  it('an SMTP server refusing the message is 503, and the link it would have carried does not exist', async () => {
    const a = await linkAccount('otp-smtp');
    const b = new Browser(s, { ip: freshIp() });
    await b.post('/auth/email', { email: a.email });
    mail.refuse = true;
    try {
      const r = await b.post('/auth/otp/start');
      expect(r.statusCode).toBe(503);
    } finally {
      mail.refuse = false;
    }
    expect((await secretOf(s, a.id)).OtpLinks ?? []).toEqual([]);
  });

  it("the asking page's Auth stream gets the frame when the link is approved", async () => {
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    const a = await linkAccount('otp-stream');
    const { b, link } = await asked(a);
    const cookie = [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const c = await EventClient.open(base, undefined, { headers: { cookie, origin: base } });
    try {
      c.send({ Kind: 'Auth' });
      await c.caughtUp('Auth');
      expect(
        (await new Browser(s, { ip: freshIp() }).post('/auth/otp/finish', { token: link.token })).statusCode,
      ).toBe(204);
      await c.until((x) =>
        x.frames.some((f) => f.Kind === 'Auth' && ((f.Item.Proven as string[]) ?? []).includes('otp')),
      );
      await c.waitClose();
      expect(c.frames.at(-1)).toMatchObject({ StatusCode: 100 });
    } finally {
      c.ws.terminate();
    }
  });
});

describe('e-mail link without mail.host (development)', () => {
  it('writes the message to mail.folder and logs the file, not the link', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'gatehouse-mail-'));
    const s = await startTestService('sqlite', { SVC_MAIL_FOLDER: folder });
    try {
      const a = await account(s, { tag: 'otp-dev' });
      const b = await signIn(s, a, { password: true }, { level: 2 });
      expect((await b.req({ method: 'PUT', url: '/auth/enroll/otp' })).statusCode).toBe(204);
      const c = new Browser(s, { ip: freshIp() });
      await c.post('/auth/email', { email: a.email });
      expect((await c.post('/auth/otp/start')).statusCode).toBe(200);
      const files = await readdir(folder);
      expect(files).toHaveLength(1);
      const raw = await readFile(join(folder, files[0] as string), 'utf8');
      const { token } = signinLink(raw);
      expect(raw).toContain(`To: ${a.email}`);
      const line = s.logs.find((l) => l.includes('written to a file'));
      expect(line).toContain(files[0]);
      expect(s.logs.join('\n')).not.toContain(token.split('.')[1]);
      expect((await new Browser(s, { ip: freshIp() }).post('/auth/otp/finish', { token })).statusCode).toBe(
        204,
      );
    } finally {
      await s.close();
      await rm(folder, { recursive: true, force: true });
    }
  });
});
