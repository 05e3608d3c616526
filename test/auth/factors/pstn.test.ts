import { mkdtemp, readFile, rm } from 'node:fs/promises';
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
  PW,
  secretOf,
  signIn,
} from '../../kit/index.js';
import { codeOf, FakeProvider } from '../../kit/pstn.js';

let numbers = 0;
const freshNumber = () => `+1555${String(Date.now() % 1_000_000).padStart(6, '0')}${++numbers % 10}`;

/**
 * The phone factor (src/auth/factors/pstn, docs/signin.md "Phone"), sending through a fake of the
 * common SMS/voice HTTP API started here; every code is taken from what the fake received.
 */
describe.each(backends())('phone (PSTN) on %s', (backend) => {
  let s: TestService;
  let fake: FakeProvider;

  beforeAll(async () => {
    fake = await FakeProvider.start();
    s = await startTestService(backend, fake.env());
  });
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });

  /** Adds a phone in a signed-in session and, unless told not to, verifies it with the code sent. */
  async function addPhone(b: Browser, mode: 'sms' | 'voice' = 'sms', verify = true) {
    const number = freshNumber();
    const before = fake.requests.length;
    const r = await b.req({ method: 'POST', url: '/auth/enroll/pstn', json: { Number: number, Mode: mode } });
    expect(r.statusCode, r.body).toBe(201);
    const device = r.json() as { ID: string; Number: string; Verified: boolean };
    expect(device).toMatchObject({ Number: number, Mode: mode, Verified: false });
    const sent = await fake.next(number, before);
    if (verify) {
      const v = await b.req({
        method: 'POST',
        url: `/auth/enroll/pstn/${device.ID}/verify`,
        json: { Code: codeOf(sent) },
      });
      expect(v.statusCode, v.body).toBe(204);
    }
    return { id: device.ID, number, sent };
  }

  /** An account with a verified phone; the browser that added it is returned too. */
  async function phoneAccount(tag: string, mode: 'sms' | 'voice' = 'sms') {
    const a = await account(s, { tag });
    const owner = await signIn(s, a, { password: true }, { level: 2 });
    const phone = await addPhone(owner, mode);
    return { a, owner, ...phone };
  }

  async function identifiedAs(a: Account) {
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/email', { email: a.email })).statusCode).toBe(204);
    return b;
  }

  /** Starts a sign-in code on a browser; the code the fake received. */
  async function started(b: Browser, id: string, number: string) {
    const before = fake.requests.length;
    const r = await b.post(`/auth/pstn/${id}/start`);
    expect(r.statusCode, r.body).toBe(204);
    return codeOf(await fake.next(number, before));
  }

  it('adding a phone is a credential change (step-up; never a plain API key); the provider gets the shape it expects', async () => {
    const a = await account(s, { tag: 'pstn-enrol' });
    const key = await s.keyFor(['user'], a.id);
    const viaKey = await s.req({
      method: 'POST',
      url: '/auth/enroll/pstn',
      key,
      payload: { Number: '+15551112222' },
    });
    expect(viaKey.statusCode).toBe(403);
    const weak = await identifiedAs(a);
    expect(
      (await weak.req({ method: 'POST', url: '/auth/enroll/pstn', json: { Number: '+15551112222' } }))
        .statusCode,
    ).toBe(401);

    const b = await signIn(s, a, { password: true }, { level: 2 });
    for (const bad of ['5551112222', '+0123456789', '+1', '+1555111222233334444', 'tel:+15551112222'])
      expect(
        (await b.req({ method: 'POST', url: '/auth/enroll/pstn', json: { Number: bad } })).statusCode,
        bad,
      ).toBe(400);
    expect(
      (
        await b.req({
          method: 'POST',
          url: '/auth/enroll/pstn',
          json: { Number: '+15551112222', Mode: 'fax' },
        })
      ).statusCode,
    ).toBe(400);

    const { id, number, sent } = await addPhone(b, 'sms', false);
    expect(sent.path).toBe('/2010-04-01/Accounts/AC0123456789/Messages.json');
    expect(sent.authorization).toBe(`Basic ${Buffer.from('AC0123456789:provider-token').toString('base64')}`);
    expect(sent.form).toMatchObject({ To: number, From: '+15550000000' });
    expect(sent.form.Body).toMatch(/^\d{6} is your .* sign-in code/);
    // Spaces, dashes and brackets in the number are tolerated; the same number twice is 409.
    const dup = `${number.slice(0, 2)} (${number.slice(2, 5)}) ${number.slice(5)}`;
    expect(
      (await b.req({ method: 'POST', url: '/auth/enroll/pstn', json: { Number: dup } })).statusCode,
    ).toBe(409);

    expect(
      (
        await b.req({
          method: 'POST',
          url: `/auth/enroll/pstn/${id}/verify`,
          json: { Code: '000000' === codeOf(sent) ? '111111' : '000000' },
        })
      ).statusCode,
    ).toBe(403);
    expect(
      (await b.req({ method: 'POST', url: `/auth/enroll/pstn/${id}/verify`, json: { Code: codeOf(sent) } }))
        .statusCode,
    ).toBe(204);
    const list = (await b.req({ url: '/auth/enroll/pstn' })).json() as { ID: string; Verified: boolean }[];
    expect(list).toEqual([expect.objectContaining({ ID: id, Number: number, Verified: true })]);
    // A verified phone is a second kind of factor: removing it needs both (level 3).
    expect((await b.req({ method: 'DELETE', url: `/auth/enroll/pstn/${id}` })).statusCode).toBe(401);
  });

  it('signs in with the code: start 204, finish 204, the level rises; the code works once', async () => {
    const { a, id, number } = await phoneAccount('pstn-flow');
    const b = await identifiedAs(a);
    const listed = (await b.req({ url: '/auth/pstn' })).json() as { ID: string; Number: string }[];
    expect(listed).toEqual([
      { ID: id, Number: `${'•'.repeat(number.length - 3)}${number.slice(-2)}`, Mode: 'sms', Verified: true },
    ]);
    expect(JSON.stringify(listed)).not.toContain(number.slice(2, -2));
    const code = await started(b, id, number);
    expect((await b.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(204);
    expect((await authResponse(b)).Proven).toEqual(['pstn']);
    expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
    expect(await levelOf(b)).toBe(3);
    const again = await identifiedAs(a);
    expect((await again.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(403);
  });

  it('a voice call reads the code out (Calls.json, TwiML)', async () => {
    const { a, id, number, sent } = await phoneAccount('pstn-voice', 'voice');
    expect(sent.path).toBe('/2010-04-01/Accounts/AC0123456789/Calls.json');
    expect(sent.form.Twiml).toMatch(/^<Response><Say>.*\d \d \d \d \d \d.*<\/Say>/);
    const b = await identifiedAs(a);
    const code = await started(b, id, number);
    expect((await b.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(204);
  });

  it('an unverified phone is 422 and gets nothing; an unknown one is 404', async () => {
    const a = await account(s, { tag: 'pstn-unverified' });
    const owner = await signIn(s, a, { password: true }, { level: 2 });
    const { id } = await addPhone(owner, 'sms', false);
    // A second phone while the first is unverified: still one kind of factor, level 2 suffices.
    await addPhone(owner);
    const b = await identifiedAs(a);
    const before = fake.requests.length;
    const r = await b.post(`/auth/pstn/${id}/start`);
    expect(r.statusCode).toBe(422);
    expect(r.headers['x-error-code']).toBe('Device Not Verified');
    expect((await b.post('/auth/pstn/nosuchphone123/start')).statusCode).toBe(404);
    expect(fake.requests.length).toBe(before);
    // Nobody named: 400.
    expect((await new Browser(s, { ip: freshIp() }).post(`/auth/pstn/${id}/start`)).statusCode).toBe(400);
  });

  it('a code is for the session that asked: another browser of the same user cannot use it', async () => {
    const { a, id, number } = await phoneAccount('pstn-bound');
    const asker = await identifiedAs(a);
    const code = await started(asker, id, number);
    const other = await identifiedAs(a);
    expect((await other.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(403);
    expect(await levelOf(other)).toBe(1);
    expect((await asker.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(204);
  });

  it('DELETE /auth/pstn/:id cancels the pending code (204)', async () => {
    const { a, id, number } = await phoneAccount('pstn-cancel');
    const b = await identifiedAs(a);
    const code = await started(b, id, number);
    expect((await b.req({ method: 'DELETE', url: `/auth/pstn/${id}` })).statusCode).toBe(204);
    expect((await b.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(403);
  });

  it('an expired code is 403', async () => {
    const { a, id, number } = await phoneAccount('pstn-expiry');
    const b = await identifiedAs(a);
    const code = await started(b, id, number);
    await s.store.systemPut(User, a.id, (doc, sec) => {
      const codes = (sec.PSTNCodes as unknown as { Expires: number }[]).map((c) => ({
        ...c,
        Expires: Date.now() - 1,
      }));
      return doc ? { doc, secret: { ...sec, PSTNCodes: codes as never } } : null;
    });
    expect((await b.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(403);
  });

  it('wrong codes are 403, then 429 with X-Next-Attempt, like passwords; the right one is then held too', async () => {
    const { a, id, number } = await phoneAccount('pstn-guess');
    const b = await identifiedAs(a);
    const code = await started(b, id, number);
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.stringMatching(/^[0-9]{6}$/), fc.string({ minLength: 1, maxLength: 12 })),
        async (guess) => {
          fc.pre(guess.trim() !== '' && guess.replace(/\s+/g, '') !== code);
          const r = await b.post(`/auth/pstn/${id}/finish`, { code: guess });
          statuses.push(r.statusCode);
          expect([403, 429]).toContain(r.statusCode);
          if (r.statusCode === 429) expect(r.headers['x-next-attempt']).toMatch(HTTP_DATE);
        },
      ),
      { numRuns: 8 },
    );
    expect(statuses.slice(0, 3)).toEqual([403, 403, 403]);
    expect(statuses).toContain(429);
    expect((await b.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(429);
    expect(await levelOf(b)).toBe(1);
  });

  it('limits how many codes a user can be sent (429 + X-Next-Attempt)', async () => {
    const { a, id, number } = await phoneAccount('pstn-limit');
    // The verification took one of the 3; two sign-in codes more, then 429.
    const b = await identifiedAs(a);
    await started(b, id, number);
    await started(b, id, number);
    const r = await b.post(`/auth/pstn/${id}/start`);
    expect(r.statusCode).toBe(429);
    expect(r.headers['x-next-attempt']).toMatch(HTTP_DATE);
  });

  it('a provider refusing is 503 and leaves no code behind', async () => {
    const { a, id } = await phoneAccount('pstn-down');
    const b = await identifiedAs(a);
    fake.status = 500;
    try {
      expect((await b.post(`/auth/pstn/${id}/start`)).statusCode).toBe(503);
    } finally {
      fake.status = 201;
    }
    expect((await secretOf(s, a.id)).PSTNCodes).toEqual([]);
  });

  it('stores codes only hashed and never logs them', async () => {
    const { a, id, number } = await phoneAccount('pstn-hash');
    const b = await identifiedAs(a);
    const code = await started(b, id, number);
    expect(JSON.stringify(await secretOf(s, a.id))).not.toMatch(
      new RegExp(`"${code}"|[^0-9a-zA-Z]${code}[^0-9]`),
    );
    expect(s.logs.join('\n')).not.toContain(code);
  });

  it('the Auth stream of the session gets the frame when the code is accepted', async () => {
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    const { a, id, number } = await phoneAccount('pstn-stream');
    const b = await identifiedAs(a);
    const code = await started(b, id, number);
    const cookie = [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const c = await EventClient.open(base, undefined, { headers: { cookie, origin: base } });
    try {
      c.send({ Kind: 'Auth' });
      await c.caughtUp('Auth');
      expect((await b.post(`/auth/pstn/${id}/finish`, { code })).statusCode).toBe(204);
      await c.until((x) =>
        x.frames.some((f) => f.Kind === 'Auth' && ((f.Item.Proven as string[]) ?? []).includes('pstn')),
      );
      await c.waitClose();
    } finally {
      c.ws.terminate();
    }
  });
});

describe('phone codes with pstn.provider=folder (development)', () => {
  it('writes each message to pstn.folder and logs the file, not the code', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'gatehouse-pstn-'));
    const s = await startTestService('sqlite', { SVC_PSTN_FOLDER: folder });
    try {
      const a = await account(s, { tag: 'pstn-dev' });
      const b = await signIn(s, a, { password: true }, { level: 2 });
      const r = await b.req({ method: 'POST', url: '/auth/enroll/pstn', json: { Number: '+15557654321' } });
      expect(r.statusCode, r.body).toBe(201);
      const lines = (await readFile(join(folder, 'messages.jsonl'), 'utf8')).trim().split('\n');
      const msg = JSON.parse(lines[0] as string) as { To: string; Mode: string; Text: string };
      expect(msg).toMatchObject({ To: '+15557654321', Mode: 'sms' });
      const code = (/\d{6}/.exec(msg.Text) as RegExpExecArray)[0];
      expect(s.logs.some((l) => l.includes('messages.jsonl'))).toBe(true);
      expect(s.logs.join('\n')).not.toContain(code);
      const v = await b.req({
        method: 'POST',
        url: `/auth/enroll/pstn/${r.json().ID}/verify`,
        json: { Code: code },
      });
      expect(v.statusCode).toBe(204);
    } finally {
      await s.close();
      await rm(folder, { recursive: true, force: true });
    }
  });
});
