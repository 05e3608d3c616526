import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addLink, findLink, userLinks } from '../../src/auth/factors/oauth2rp/store.js';
import { putReference, webm } from '../auth/factors/vouch/kit.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { ctxOf } from '../scripts/kit.js';

/*
 * Records in tables of their own follow a merge: a reference video (the credential a colleague
 * vouches against) goes to a target that has none, and a merged user keeps none; provider
 * identities (federated links) sign in as the target from then on.
 */

describe.each(backends())('merge and reference videos on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  const user = async (tag: string) =>
    (await s.req({ method: 'POST', url: '/users', payload: { Email: `${tag}${Date.now()}@example.com` } }))
      .headers['x-id'] as string;
  const video = (id: string) => s.req({ url: `/users/${id}/reference-video` });

  it('moves to a target without one, with its magic words', async () => {
    const from = await user('vfrom');
    const to = await user('vto');
    const body = webm(5000);
    expect((await putReference(s, from, body, 'otter,maple,quartz')).statusCode).toBe(204);
    expect((await video(to)).statusCode).toBe(404);
    expect((await s.req({ method: 'POST', url: `/users/${to}/merge?from=${from}` })).statusCode).toBe(204);
    const moved = await video(to);
    expect(moved.statusCode).toBe(200);
    expect(moved.headers['x-magic-words']).toBe('otter,maple,quartz');
    expect(Buffer.compare(moved.rawPayload, body)).toBe(0);
    expect((await video(from)).statusCode).toBe(404);
  });

  it("keeps the target's own and deletes the merged user's", async () => {
    const from = await user('wfrom');
    const to = await user('wto');
    const mine = webm(3000);
    expect((await putReference(s, from, webm(4000), 'alpha,bravo,charlie')).statusCode).toBe(204);
    expect((await putReference(s, to, mine, 'delta,echo,foxtrot')).statusCode).toBe(204);
    expect((await s.req({ method: 'POST', url: `/users/${to}/merge?from=${from}` })).statusCode).toBe(204);
    const kept = await video(to);
    expect(kept.headers['x-magic-words']).toBe('delta,echo,foxtrot');
    expect(Buffer.compare(kept.rawPayload, mine)).toBe(0);
    expect((await video(from)).statusCode).toBe(404);
  });

  it('moves provider identities, so they sign in as the target', async () => {
    const from = await user('lfrom');
    const to = await user('lto');
    const ctx = ctxOf(s);
    const subject = `sub-${Date.now()}`;
    await addLink(ctx, {
      issuer: 'https://idp.example',
      subject,
      userId: from,
      appId: 'app',
      email: 'x@idp',
    });
    expect((await s.req({ method: 'POST', url: `/users/${to}/merge?from=${from}` })).statusCode).toBe(204);
    expect((await findLink(ctx, 'https://idp.example', subject))?.user_id).toBe(to);
    expect(await userLinks(ctx, from)).toEqual([]);
  });
});
