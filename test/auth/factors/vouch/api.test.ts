import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VouchRequest } from '../../../../src/objects/vouchrequest.js';
import { backends, startTestService, type TestService } from '../../../helpers.js';
import { account, Browser, freshIp, levelOf, signIn } from '../../../kit/index.js';
import { putReference, requesterAndColleague, send, teamOf, webm } from './kit.js';

/**
 * Vouching (src/auth/factors/vouch, docs/signin.md "Vouching"): POST /auth/vouch, GET and DELETE
 * /auth/vouch/:id, POST /auth/vouch/:id/video, and the vouchers' side (videos, approve, decline),
 * with the statuses the spec lists and the abuse a requester, an outsider or a voucher might try.
 */
describe.each(backends())('vouching on %s', { timeout: 120_000 }, (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  /** The requester's browser at the e-mail step (level 1), or after the password (level 2). */
  const requesterBrowser = async (email: string, password = false) => {
    const b = new Browser(s, { ip: freshIp() });
    expect((await b.post('/auth/email', { email })).statusCode).toBe(204);
    if (password)
      expect((await b.post('/auth/password', { password: 'correct horse battery staple' })).statusCode).toBe(
        204,
      );
    return b;
  };

  it('the whole flow: request (200), video (204), a colleague approves, the session is raised', async () => {
    const { requester, colleague, reference } = await requesterAndColleague(s);
    const outsider = await account(s, { totp: true, tag: 'out' });
    const r = await requesterBrowser(requester.email, true);
    expect(await levelOf(r)).toBe(2);

    const created = await r.post('/auth/vouch', { reason: 'lost my phone' });
    expect(created.statusCode, created.body).toBe(200);
    const v = created.json();
    expect(v).toMatchObject({ State: 'pending', Level: 3, HaveVideo: false, Reason: 'lost my phone' });
    expect(v.MagicWords).toHaveLength(4);
    expect(v.Vouchers.map((x: { ID: string }) => x.ID)).toEqual([colleague.id]);
    expect(v.VouchURL).toBe(`/signin/vouch/${v.ID}`);
    // GET: 200 with the state; the generic object shows the same request to its owner's API view.
    const got = await r.req({ url: `/auth/vouch/${v.ID}` });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toMatchObject({ ID: v.ID, State: 'pending', MagicWords: v.MagicWords });

    const recording = webm(700_000);
    const up = await send(r, 'POST', `/auth/vouch/${v.ID}/video`, recording);
    expect(up.statusCode, up.body).toBe(204);
    expect(up.body).toBe('');

    // The colleague, signed in with both factors, sees the request, both videos and the words.
    const c = await signIn(s, colleague, { password: true, totp: true }, { level: 3 });
    const seen = await c.req({ url: `/auth/vouch/${v.ID}` });
    expect(seen.statusCode).toBe(200);
    expect(seen.json()).toMatchObject({ HaveVideo: true, MagicWords: v.MagicWords });
    const videoId = seen.json().VideoID as string;
    expect(videoId).not.toBe('');
    const newVideo = await send(c, 'GET', `/auth/vouch/${v.ID}/video`);
    expect(newVideo.statusCode).toBe(200);
    expect(newVideo.headers['content-type']).toBe('video/webm');
    expect(newVideo.headers['x-magic-words']).toBe(v.MagicWords.join(','));
    expect(newVideo.rawPayload.equals(recording)).toBe(true);
    const ref = await send(c, 'GET', `/auth/vouch/${v.ID}/reference-video`);
    expect(ref.statusCode).toBe(200);
    expect(ref.rawPayload.equals(reference)).toBe(true);
    expect(ref.headers['cache-control']).toContain('no-store');

    // Nobody else sees it: the requester gets no video back, an outsider gets 404 everywhere.
    expect((await send(r, 'GET', `/auth/vouch/${v.ID}/video`)).statusCode).toBe(404);
    expect((await send(r, 'GET', `/auth/vouch/${v.ID}/reference-video`)).statusCode).toBe(404);
    const o = await signIn(s, outsider, { password: true, totp: true }, { level: 3 });
    for (const url of [
      `/auth/vouch/${v.ID}`,
      `/auth/vouch/${v.ID}/video`,
      `/auth/vouch/${v.ID}/reference-video`,
    ])
      expect((await send(o, 'GET', url)).statusCode, url).toBe(404);
    expect((await o.post(`/auth/vouch/${v.ID}/approve`, { video: videoId })).statusCode).toBe(404);
    const outsiderKey = await s.keyFor(['user'], outsider.id);
    expect(
      (await s.req({ url: `/vouchrequests/${v.ID}`, key: outsiderKey })).statusCode,
    ).toBeGreaterThanOrEqual(403);

    const ok = await c.post(`/auth/vouch/${v.ID}/approve`, { video: videoId });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ State: 'approved', VoucherID: colleague.id });
    // The requester's session is raised to the request's level (new token at its next request).
    expect(await levelOf(r)).toBe(3);
    expect((await r.req({ url: '/users/me' })).statusCode).toBe(200);
    const auth = (await r.post('/auth')).json();
    expect(auth.Proven).toContain('vouch');
    // The recording is deleted once the request is decided.
    expect((await send(c, 'GET', `/auth/vouch/${v.ID}/video`)).statusCode).toBe(404);
    const stored = await s.store.get(VouchRequest, v.ID);
    expect(stored?.doc).toMatchObject({ State: 'approved', VoucherID: colleague.id, HaveVideo: true });
  });

  it('DELETE /auth/vouch/:id cancels (200); only the requesting session may, and only while pending', async () => {
    const { requester } = await requesterAndColleague(s);
    const r = await requesterBrowser(requester.email);
    const v = (await r.post('/auth/vouch')).json();
    // Another session of the same user (someone else who typed the address) cannot touch it.
    const other = await requesterBrowser(requester.email);
    expect((await other.req({ method: 'DELETE', url: `/auth/vouch/${v.ID}` })).statusCode).toBe(404);
    expect((await send(other, 'POST', `/auth/vouch/${v.ID}/video`, webm())).statusCode).toBe(404);
    const del = await r.req({ method: 'DELETE', url: `/auth/vouch/${v.ID}` });
    expect(del.statusCode).toBe(200);
    expect(del.json()).toMatchObject({ ID: v.ID, State: 'cancelled' });
    expect((await r.req({ method: 'DELETE', url: `/auth/vouch/${v.ID}` })).statusCode).toBe(409);
    expect((await r.req({ url: '/auth/vouch/unknownid12345' })).statusCode).toBe(404);
    expect((await r.req({ method: 'DELETE', url: '/auth/vouch/unknownid12345' })).statusCode).toBe(404);
    expect((await send(r, 'POST', '/auth/vouch/unknownid12345/video', webm())).statusCode).toBe(404);
  });

  it('videos are checked: 415 not WebM, 413 above 20 MiB, 400 empty; nothing is stored', async () => {
    const { requester } = await requesterAndColleague(s);
    const r = await requesterBrowser(requester.email);
    const v = (await r.post('/auth/vouch')).json();
    const url = `/auth/vouch/${v.ID}/video`;
    expect((await send(r, 'POST', url, Buffer.from('GIF89a not a video at all'))).statusCode).toBe(415);
    // Matroska is EBML too, but not WebM.
    const mkv = Buffer.from(webm(100));
    mkv.write('mkv!', 0x17, 'latin1');
    expect((await send(r, 'POST', url, mkv)).statusCode).toBe(415);
    expect(
      (await send(r, 'POST', url, webm(), { 'content-type': 'application/octet-stream' })).statusCode,
    ).toBe(415);
    const big = await send(r, 'POST', url, webm(20 * 1024 * 1024 + 1));
    expect(big.statusCode).toBe(413);
    expect(big.headers['x-error-code']).toBe('Payload Too Large');
    expect((await send(r, 'POST', url, Buffer.alloc(0), { 'content-type': 'video/webm' })).statusCode).toBe(
      400,
    );
    expect((await r.req({ url: `/auth/vouch/${v.ID}` })).json().HaveVideo).toBe(false);
    // Exactly the limit is accepted.
    expect((await send(r, 'POST', url, webm(20 * 1024 * 1024))).statusCode).toBe(204);
    const rows = await s.db.kysely
      .withTables<{ videos: { owner: string; complete: number } }>()
      .selectFrom('videos')
      .select(['owner', 'complete'])
      .where('owner', '=', `vouch:${v.ID}`)
      .execute();
    expect(rows).toEqual([{ owner: `vouch:${v.ID}`, complete: 1 }]);
  });

  it('who may vouch: colleagues in groups that need approval and approvers; never oneself or an open group', async () => {
    const requester = await account(s, { totp: true, tag: 'req' });
    expect((await putReference(s, requester.id, webm())).statusCode).toBe(204);
    const friend = await account(s, { totp: true, tag: 'friend' });
    // An open group (anyone may join): its members are not vouchers.
    await teamOf(s, [requester.id, friend.id], { open: true });
    const r = await requesterBrowser(requester.email);
    const none = await r.post('/auth/vouch');
    expect(none.statusCode).toBe(409);
    // Naming the friend does not make them a voucher.
    expect((await r.post('/auth/vouch', { voucher: friend.email })).statusCode).toBe(403);
    expect((await r.post('/auth/vouch', { voucher: requester.email })).statusCode).toBe(403);
    // A group's Approvers are vouchers, as are active members of its ApproverGroup (if it needs approval).
    const approver = await account(s, { totp: true, tag: 'appr' });
    const helpdeskMember = await account(s, { totp: true, tag: 'help' });
    const helpdesk = await teamOf(s, [helpdeskMember.id]);
    const g = await s.req({
      method: 'POST',
      url: '/groups',
      payload: { Name: `open-${Date.now()}`, Approvers: [approver.id], ApproverGroup: helpdesk },
    });
    const gid = String(g.headers['x-id']);
    expect(
      (await s.req({ method: 'POST', url: `/groups/${gid}/members/${requester.id}`, payload: {} }))
        .statusCode,
    ).toBeLessThan(300);
    const v = await r.post('/auth/vouch');
    expect(v.statusCode, v.body).toBe(200);
    expect(
      v
        .json()
        .Vouchers.map((x: { ID: string }) => x.ID)
        .sort(),
    ).toEqual([approver.id, helpdeskMember.id].sort());
    // Narrowed to one group; a named voucher must be eligible.
    const viaHelpdesk = await r.post('/auth/vouch', { group: helpdesk });
    expect(viaHelpdesk.json().Vouchers.map((x: { ID: string }) => x.ID)).toEqual([helpdeskMember.id]);
    const named = await r.post('/auth/vouch', { voucher: approver.email });
    expect(named.json().Vouchers.map((x: { ID: string }) => x.ID)).toEqual([approver.id]);
    // A user without a reference video cannot ask (nothing to compare with).
    const noRef = await account(s, { tag: 'noref' });
    await teamOf(s, [noRef.id, friend.id]);
    expect((await (await requesterBrowser(noRef.email)).post('/auth/vouch')).statusCode).toBe(409);
  });

  it('a voucher never vouches for themselves, nor above their own proven level, nor for a changed video', async () => {
    const { requester, colleague } = await requesterAndColleague(s);
    const r = await requesterBrowser(requester.email, true);
    const v = (await r.post('/auth/vouch')).json();
    expect(v.Level).toBe(3);
    // The requester's own strong session (same user) is no voucher.
    const self = await signIn(s, requester, { password: true, totp: true }, { level: 3 });
    expect((await self.post(`/auth/vouch/${v.ID}/approve`, { video: 'x' })).statusCode).toBe(403);
    expect((await self.post(`/auth/vouch/${v.ID}/decline`)).statusCode).toBe(403);
    // Before the video: nothing to approve.
    const c2 = await signIn(s, colleague, { password: true }, { level: 2 });
    expect((await c2.req({ url: `/auth/vouch/${v.ID}` })).statusCode).toBe(200);
    const first = webm(5000);
    expect((await send(r, 'POST', `/auth/vouch/${v.ID}/video`, first)).statusCode).toBe(204);
    const videoId = (await c2.req({ url: `/auth/vouch/${v.ID}` })).json().VideoID as string;
    // Level 2 cannot raise to 3: 401 with an intent to step up.
    const low = await c2.post(`/auth/vouch/${v.ID}/approve`, { video: videoId });
    expect(low.statusCode).toBe(401);
    expect(low.headers['x-error-code']).toBe('Insufficient Integrity');
    expect(low.json().Intent).toEqual(expect.any(String));
    expect(await levelOf(r)).toBe(2);
    // The requester replaces the video after the voucher watched it: the old ID no longer approves.
    expect((await send(r, 'POST', `/auth/vouch/${v.ID}/video`, webm(6000))).statusCode).toBe(204);
    const c3 = await signIn(s, colleague, { password: true, totp: true }, { level: 3 });
    const stale = await c3.post(`/auth/vouch/${v.ID}/approve`, { video: videoId });
    expect(stale.statusCode).toBe(409);
    expect(await levelOf(r)).toBe(2);
    // An API key (even the admin's) is no person watching a video.
    expect(
      (await s.req({ method: 'POST', url: `/auth/vouch/${v.ID}/approve`, payload: { video: videoId } }))
        .statusCode,
    ).toBe(401);
    // Declining ends it; nothing more can happen to it.
    const no = await c3.post(`/auth/vouch/${v.ID}/decline`);
    expect(no.statusCode).toBe(200);
    expect(no.json()).toMatchObject({ State: 'rejected', VoucherID: colleague.id });
    expect((await c3.req({ url: `/auth/vouch/${v.ID}` })).json().VideoID).toBe('');
    expect((await c3.post(`/auth/vouch/${v.ID}/approve`, { video: videoId })).statusCode).toBe(409);
    expect(await levelOf(r)).toBe(2);
  });

  it('a voucher who left the group, or was disabled, can no longer decide', async () => {
    const { requester, colleague, group } = await requesterAndColleague(s);
    const r = await requesterBrowser(requester.email);
    const v = (await r.post('/auth/vouch')).json();
    expect((await send(r, 'POST', `/auth/vouch/${v.ID}/video`, webm())).statusCode).toBe(204);
    const c = await signIn(s, colleague, { password: true, totp: true }, { level: 3 });
    const videoId = (await c.req({ url: `/auth/vouch/${v.ID}` })).json().VideoID as string;
    expect(
      (await s.req({ method: 'DELETE', url: `/groups/${group}/members/${colleague.id}` })).statusCode,
    ).toBeLessThan(300);
    expect((await c.post(`/auth/vouch/${v.ID}/approve`, { video: videoId })).statusCode).toBe(404);
    expect(await levelOf(r)).toBe(1);
  });

  it('walks the transition table: every decided state refuses every operation with 409', async () => {
    const { requester, colleague } = await requesterAndColleague(s);
    const c = await signIn(s, colleague, { password: true, totp: true }, { level: 3 });
    const states: Record<string, { r: Browser; id: string }> = {};
    for (const end of ['approved', 'rejected', 'cancelled', 'expired'] as const) {
      const r = await requesterBrowser(requester.email);
      const v = (await r.post('/auth/vouch')).json();
      expect((await send(r, 'POST', `/auth/vouch/${v.ID}/video`, webm())).statusCode).toBe(204);
      const videoId = (await c.req({ url: `/auth/vouch/${v.ID}` })).json().VideoID as string;
      if (end === 'approved')
        expect((await c.post(`/auth/vouch/${v.ID}/approve`, { video: videoId })).statusCode).toBe(200);
      if (end === 'rejected') expect((await c.post(`/auth/vouch/${v.ID}/decline`)).statusCode).toBe(200);
      if (end === 'cancelled')
        expect((await r.req({ method: 'DELETE', url: `/auth/vouch/${v.ID}` })).statusCode).toBe(200);
      if (end === 'expired')
        await s.store.systemPut(VouchRequest, v.ID, (doc, secret) => ({
          doc: { ...doc, ExpireTime: new Date(Date.now() - 1000).toISOString() },
          secret,
        }));
      expect((await c.req({ url: `/auth/vouch/${v.ID}` })).json().State).toBe(end);
      states[end] = { r, id: v.ID };
    }
    for (const [state, { r, id }] of Object.entries(states)) {
      const tries = [
        await send(r, 'POST', `/auth/vouch/${id}/video`, webm()),
        await r.req({ method: 'DELETE', url: `/auth/vouch/${id}` }),
        await c.post(`/auth/vouch/${id}/approve`, { video: 'anything' }),
        await c.post(`/auth/vouch/${id}/decline`),
      ];
      for (const t of tries) expect(t.statusCode, `${state}: ${t.body}`).toBe(409);
      expect((await c.req({ url: `/auth/vouch/${id}` })).json().State).toBe(state);
    }
  });

  it('limits requests: a session has one pending (a new one replaces it), a user three, and a rate', async () => {
    const { requester } = await requesterAndColleague(s);
    const r = await requesterBrowser(requester.email);
    const a = (await r.post('/auth/vouch')).json();
    const b = (await r.post('/auth/vouch')).json();
    expect((await r.req({ url: `/auth/vouch/${a.ID}` })).json().State).toBe('cancelled');
    expect((await r.req({ url: `/auth/vouch/${b.ID}` })).json().State).toBe('pending');
    // Three more from this session (each replacing the last) use up the per-user burst of five.
    for (let i = 0; i < 3; i++) expect((await r.post('/auth/vouch')).statusCode).toBe(200);
    const refused = await r.post('/auth/vouch');
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['x-next-attempt']).toEqual(expect.any(String));
    // At most three pending requests per user, from different sessions.
    const other = await requesterAndColleague(s);
    for (let i = 0; i < 3; i++)
      expect((await (await requesterBrowser(other.requester.email)).post('/auth/vouch')).statusCode).toBe(
        200,
      );
    expect((await (await requesterBrowser(other.requester.email)).post('/auth/vouch')).statusCode).toBe(409);
  });

  it('a voucher must be signed in for real; decisions need the CSRF header; administrators may look', async () => {
    const { requester, colleague } = await requesterAndColleague(s);
    const r = await requesterBrowser(requester.email);
    const v = (await r.post('/auth/vouch')).json();
    expect((await send(r, 'POST', `/auth/vouch/${v.ID}/video`, webm())).statusCode).toBe(204);
    // The colleague's address typed in (level 1, nothing proven): sees nothing, decides nothing.
    const typed = await requesterBrowser(colleague.email);
    expect((await typed.req({ url: `/auth/vouch/${v.ID}` })).statusCode).toBe(404);
    expect((await send(typed, 'GET', `/auth/vouch/${v.ID}/video`)).statusCode).toBe(404);
    const weak = await typed.post(`/auth/vouch/${v.ID}/approve`, { video: 'x' });
    expect(weak.statusCode).toBe(401);
    // Without the CSRF header (a cross-site form post), a real voucher's decision is refused.
    const c = await signIn(s, colleague, { password: true, totp: true }, { level: 3 });
    const videoId = (await c.req({ url: `/auth/vouch/${v.ID}` })).json().VideoID as string;
    const noCsrf = await c.req({
      method: 'POST',
      url: `/auth/vouch/${v.ID}/approve`,
      form: { video: videoId },
      headers: { 'x-requested-with': '' },
    });
    expect(noCsrf.statusCode).toBe(403);
    expect(noCsrf.headers['x-error-code']).toBe('CSRF Check Failed');
    expect((await r.post('/auth')).json().IntegrityLevel).toBe(1);
    // An administrator's key may read the request and its videos (not decide: see above).
    const admin = await s.req({ url: `/auth/vouch/${v.ID}` });
    expect(admin.statusCode).toBe(200);
    expect((await s.req({ url: `/auth/vouch/${v.ID}/video` })).statusCode).toBe(200);
    // The requester's own user key (not the requesting session) sees it only through /vouchrequests.
    const ownKey = await s.keyFor(['user'], requester.id);
    expect((await s.req({ url: `/auth/vouch/${v.ID}`, key: ownKey })).statusCode).toBe(404);
    expect((await s.req({ url: `/vouchrequests/${v.ID}`, key: ownKey })).statusCode).toBe(200);
  });
});
