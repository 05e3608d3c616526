import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account } from '../kit/index.js';

/**
 * The last active administrator (Admin, Active, not Disabled) stays, whoever asks and however:
 * PUT, PATCH, POST /users/:id/disable, merge and DELETE answer 409 Last Administrator and change
 * nothing; with a second active administrator the same change goes through. And PATCH (a JSON
 * Merge Patch) changes only the fields it names.
 */
describe.each(backends())('the last administrator on %s', { timeout: 120_000 }, (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  const user = (id: string) => s.req({ url: `/users/${id}` });
  const expectRefused = async (
    id: string,
    res: { statusCode: number; body: string; headers: Record<string, unknown> },
    etag: unknown,
  ) => {
    expect(res.statusCode, res.body).toBe(409);
    expect(res.headers['x-error-code']).toBe('Last Administrator');
    expect((await user(id)).headers.etag).toBe(etag);
  };

  it('refuses every way of ending the only active administrator, and allows them with a second one', async () => {
    const id = s.adminId;
    const before = await user(id);
    const etag = before.headers.etag;
    const doc = before.json() as Record<string, unknown>;
    const ifMatch = { 'if-match': String(etag) };
    for (const change of [{ Admin: false }, { Active: false }, { Disabled: true }]) {
      await expectRefused(
        id,
        await s.req({ method: 'PUT', url: `/users/${id}`, headers: ifMatch, payload: { ...doc, ...change } }),
        etag,
      );
      await expectRefused(
        id,
        await s.req({ method: 'PATCH', url: `/users/${id}`, headers: ifMatch, payload: change }),
        etag,
      );
    }
    // A PUT that leaves Admin and Active out turns both to their defaults: the trap of #28.
    await expectRefused(
      id,
      await s.req({ method: 'PUT', url: `/users/${id}`, headers: ifMatch, payload: { Email: doc.Email } }),
      etag,
    );
    await expectRefused(id, await s.req({ method: 'POST', url: `/users/${id}/disable`, payload: {} }), etag);
    await expectRefused(id, await s.req({ method: 'DELETE', url: `/users/${id}`, headers: ifMatch }), etag);
    const other = await account(s, { tag: 'plain' });
    await expectRefused(
      id,
      await s.req({ method: 'POST', url: `/users/${other.id}/merge?from=${id}`, payload: {} }),
      etag,
    );

    // With a second active administrator, the first may step down.
    await account(s, { admin: true, tag: 'second' });
    const patched = await s.req({
      method: 'PATCH',
      url: `/users/${id}`,
      headers: ifMatch,
      payload: { Admin: false },
    });
    expect(patched.statusCode, patched.body).toBe(204);
    const after = (await user(id)).json();
    expect(after.Admin).toBe(false);
    expect(after.Active).toBe(true); // PATCH kept what it did not name
    expect(after.Email).toBe(doc.Email);
  });

  it('PATCH merges objects, null resets a field, and If-Match is required', async () => {
    const a = await account(s, { tag: 'patch' });
    const u = await user(a.id);
    const put = await s.req({
      method: 'PATCH',
      url: `/users/${a.id}`,
      headers: { 'if-match': String(u.headers.etag), 'content-type': 'application/merge-patch+json' },
      payload: JSON.stringify({ Name: { FullName: 'Ada King' }, UserName: 'ada' }),
    });
    expect(put.statusCode, put.body).toBe(204);
    const got = (await user(a.id)).json();
    expect(got.Name.FullName).toBe('Ada King');
    expect(got.UserName).toBe('ada');
    expect(got.Email).toBe(a.email);
    const reset = await s.req({
      method: 'PATCH',
      url: `/users/${a.id}`,
      headers: { 'if-match': String(put.headers.etag) },
      payload: { UserName: null },
    });
    expect(reset.statusCode, reset.body).toBe(204);
    expect((await user(a.id)).json().UserName).toBe('');
    expect(
      (await s.req({ method: 'PATCH', url: `/users/${a.id}`, payload: { UserName: 'x' } })).statusCode,
    ).toBe(428);
    const stale = await s.req({
      method: 'PATCH',
      url: `/users/${a.id}`,
      headers: { 'if-match': String(u.headers.etag) },
      payload: { UserName: 'x' },
    });
    expect(stale.statusCode).toBe(412);
  });
});
