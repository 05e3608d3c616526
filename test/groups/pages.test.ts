import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Membership } from '../../src/objects/membership.js';
import { Browser, makeUser, signedIn } from '../auth/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { setTenant } from '../kit/index.js';
import { create } from './fixture.js';

/** A user with a password, and a browser stand-in signed in as them (one factor). */
async function signedInUser(s: TestService, email: string) {
  const password = `pw-${email}-long-enough`;
  const id = await makeUser(s, { email, password });
  return { id, b: await signedIn(s, email, password) };
}

describe.each(backends())('access-request pages on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
    await setTenant(s, { AllowedReturnOrigins: ['https://app.example.com'] });
  });
  afterAll(async () => s?.close());

  it('walks a request, an approval and an activation that returns to next', async () => {
    const approver = await signedInUser(s, 'boss@example.com');
    const user = await signedInUser(s, 'worker@example.com');
    const g = await create(s, 'groups', {
      Name: '<script>alert(1)</script> ops',
      Description: 'Production "ops" & more',
      RequiresApproval: true,
      RequiresActivation: true,
      Approvers: [approver.id],
    });
    const next = 'https://app.example.com/after?x=1';
    const url = `/signin/groups/${g}?next=${encodeURIComponent(next)}`;
    // Not signed in: to the sign-in page, which comes back here.
    const anon = await new Browser(s).req({ url });
    expect(anon.statusCode).toBe(303);
    // A path, not a URL built from the request's Host (test/security/audit-host.test.ts).
    expect(anon.headers.location).toBe(`/signin?return=${encodeURIComponent(url)}`);
    // Signed in: the group, escaped, with a request form.
    const view = await user.b.req({ url });
    expect(view.statusCode).toBe(200);
    expect(view.headers['content-type']).toMatch(/^text\/html/);
    expect(view.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(view.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt; ops');
    expect(view.body).not.toContain('<script>');
    expect(view.body).toContain('data-state="none"');
    expect(view.body).toContain(`name="next" value="${next.replace('&', '&amp;')}"`);
    // Ask with a reason.
    const ask = await user.b.post(`/signin/groups/${g}`, {
      action: 'request',
      reason: 'deploy <today>',
      next,
    });
    expect(ask.statusCode, ask.body).toBe(303);
    expect(ask.headers.location).toBe(url);
    expect((await user.b.req({ url })).body).toContain('data-state="requested"');
    // Activating early is refused with a page naming the state.
    const early = await user.b.post(`/signin/groups/${g}`, { action: 'activate', next });
    expect(early.statusCode).toBe(409);
    expect(early.headers['content-type']).toMatch(/^text\/html/);
    expect(early.body).toContain('requested');
    // The user is no approver of their own request; the approver sees it and approves.
    expect((await user.b.req({ url: '/signin/approvals' })).body).toContain('id="empty"');
    const list = await approver.b.req({ url: '/signin/approvals' });
    expect(list.statusCode).toBe(200);
    expect(list.body).toContain('worker@example.com');
    expect(list.body).toContain('deploy &lt;today&gt;');
    const mine = await user.b.post('/signin/approvals', { group: g, user: user.id, action: 'approve' });
    expect(mine.statusCode).toBe(403);
    const ok = await approver.b.post('/signin/approvals', {
      group: g,
      user: user.id,
      action: 'approve',
      reason: 'fine',
    });
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe('/signin/approvals?done=approve');
    expect((await approver.b.req({ url: '/signin/approvals' })).body).toContain('id="empty"');
    // Activate: back to next.
    const act = await user.b.post(`/signin/groups/${g}`, { action: 'activate', next });
    expect(act.statusCode).toBe(303);
    expect(act.headers.location).toBe(next);
    const m = await s.store.get(Membership, `${g}.${user.id}`);
    expect(m?.doc).toMatchObject({
      State: 'active',
      Reason: 'deploy <today>',
      LastChange: { Via: 'session' },
    });
    expect((m?.doc.Approval as Record<string, string> | undefined)?.ByUserID).toBe(approver.id);
  });

  it('never follows a next URL off the allow-list, and refuses cross-site posts', async () => {
    const user = await signedInUser(s, 'roamer@example.com');
    const g = await create(s, 'groups', { Name: 'open-door' });
    const evil = 'https://evil.example.net/phish';
    const view = await user.b.req({ url: `/signin/groups/${g}?next=${encodeURIComponent(evil)}` });
    expect(view.body).toContain('not on this service');
    for (const bad of [evil, '//evil.example.net/', 'javascript:alert(1)']) {
      const post = await user.b.post(`/signin/groups/${g}`, { action: 'request', next: bad });
      expect(post.statusCode).toBe(303);
      expect(post.headers.location).toBe(`/signin/groups/${g}?next=${encodeURIComponent(bad)}`);
      await s.req({ method: 'DELETE', url: `/groups/${g}/members/${user.id}` });
    }
    // A form posted from another site: no X-Requested-With, foreign Origin.
    const cross = await user.b.req({
      method: 'POST',
      url: `/signin/groups/${g}`,
      form: { action: 'request' },
      headers: { 'x-requested-with': '', origin: 'https://evil.example.net' },
    });
    expect(cross.statusCode).toBe(403);
    expect(cross.headers['x-error-code']).toBe('CSRF Check Failed');
    expect(await s.store.get(Membership, `${g}.${user.id}`)).toBeUndefined();
    // A plain user may not decide on others' requests.
    const other = await signedInUser(s, 'other@example.com');
    const locked = await create(s, 'groups', { Name: 'locked', RequiresApproval: true });
    await other.b.post(`/signin/groups/${locked}`, { action: 'request' });
    const denied = await user.b.post('/signin/approvals', {
      group: locked,
      user: other.id,
      action: 'approve',
    });
    expect(denied.statusCode).toBe(403);
    expect((await s.store.get(Membership, `${locked}.${other.id}`))?.doc.State).toBe('requested');
  });

  it('shows an overdue membership as expired without writing, and lets the user join again', async () => {
    const user = await signedInUser(s, 'sleeper@example.com');
    const g = await create(s, 'groups', { Name: 'use-it-or-lose-it', ExpireUnusedDays: 7 });
    await s.req({ method: 'POST', url: `/groups/${g}/members/${user.id}` });
    const old = `${new Date(Date.now() - 8 * 86_400_000).toISOString().slice(0, 19)}Z`;
    await s.store.systemPut(Membership, `${g}.${user.id}`, (doc) => ({
      doc: { ...doc!, ActivateTime: old, LastUsed: old },
    }));
    const before = await s.store.get(Membership, `${g}.${user.id}`);
    const view = await user.b.req({ url: `/signin/groups/${g}` });
    expect(view.body).toContain('data-state="expired"');
    expect((await s.store.get(Membership, `${g}.${user.id}`))?.etag).toBe(before?.etag);
    const again = await user.b.post(`/signin/groups/${g}`, { action: 'request' });
    expect(again.statusCode).toBe(303);
    expect((await s.store.get(Membership, `${g}.${user.id}`))?.doc.State).toBe('active');
  });
});
