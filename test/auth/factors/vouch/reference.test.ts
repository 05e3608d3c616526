import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkWebmHeader, EBML_MAGIC } from '../../../../src/auth/factors/vouch/webm.js';
import { parseMagicWords } from '../../../../src/auth/factors/vouch/words.js';
import { backends, startTestService, type TestService } from '../../../helpers.js';
import { account, signIn } from '../../../kit/index.js';
import { EBML_HEADER, putReference, send, webm } from './kit.js';

/**
 * GET/PUT/DELETE /users/:id/reference-video: a reference video is a credential, so it is read
 * only by its user and administrators and changed only under the step-up rule (stepup.ts).
 */
describe.each(backends())('reference videos on %s', { timeout: 120_000 }, (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('404 when none; PUT sets, PUT again replaces; GET is video/webm with X-Magic-Words', async () => {
    const u = await account(s, { tag: 'ref' });
    expect((await s.req({ url: `/users/${u.id}/reference-video` })).statusCode).toBe(404);
    const first = webm(600_000);
    expect((await putReference(s, u.id, first, 'apple, banjo ,cactus')).statusCode).toBe(204);
    const got = await s.req({ url: `/users/${u.id}/reference-video` });
    expect(got.statusCode).toBe(200);
    expect(got.headers['content-type']).toBe('video/webm');
    expect(got.headers['x-magic-words']).toBe('apple,banjo,cactus');
    expect(got.headers['content-length']).toBe('600000');
    expect(got.rawPayload.equals(first)).toBe(true);
    const second = webm(1000);
    expect((await putReference(s, u.id, second, 'donkey')).statusCode).toBe(204);
    const again = await s.req({ url: `/users/${u.id}/reference-video` });
    expect(again.rawPayload.equals(second)).toBe(true);
    expect(again.headers['x-magic-words']).toBe('donkey');
    // Only one video per user remains stored (the replaced one's chunks are gone).
    const rows = await s.db.kysely
      .withTables<{ videos: { owner: string } }>()
      .selectFrom('videos')
      .select('owner')
      .where('owner', '=', `ref:${u.id}`)
      .execute();
    expect(rows).toHaveLength(1);
    expect((await s.req({ url: '/users/nosuchuser1234/reference-video' })).statusCode).toBe(404);
    expect((await putReference(s, 'nosuchuser1234', webm())).statusCode).toBe(404);
    expect((await s.req({ method: 'DELETE', url: `/users/${u.id}/reference-video` })).statusCode).toBe(204);
    expect((await s.req({ url: `/users/${u.id}/reference-video` })).statusCode).toBe(404);
    expect((await s.req({ method: 'DELETE', url: `/users/${u.id}/reference-video` })).statusCode).toBe(404);
  });

  it('is read by its user and administrators only; others get 404 as if there were none', async () => {
    const u = await account(s, { tag: 'ref' });
    const other = await account(s, { tag: 'other' });
    expect((await putReference(s, u.id, webm())).statusCode).toBe(204);
    expect(
      (await s.req({ url: `/users/${u.id}/reference-video`, key: await s.keyFor(['user'], u.id) }))
        .statusCode,
    ).toBe(200);
    for (const scopes of [['user'], ['audit'], ['sync'], ['user', 'audit', 'sync']])
      expect(
        (await s.req({ url: `/users/${u.id}/reference-video`, key: await s.keyFor(scopes, other.id) }))
          .statusCode,
        scopes.join(','),
      ).toBe(404);
    const own = await signIn(s, u, { password: true }, { level: 2 });
    expect((await send(own, 'GET', `/users/${u.id}/reference-video`)).statusCode).toBe(200);
    const theirs = await signIn(s, other, { password: true }, { level: 2 });
    expect((await send(theirs, 'GET', `/users/${u.id}/reference-video`)).statusCode).toBe(404);
  });

  it('changing it needs step-up: never a plain key; a session at the level the factors reach', async () => {
    const u = await account(s, { totp: true, tag: 'ref' });
    const ownKey = await s.keyFor(['user'], u.id);
    expect((await putReference(s, u.id, webm(), 'a', ownKey)).statusCode).toBe(403);
    const ownAdminish = await s.keyFor(['user', 'audit', 'sync'], u.id);
    expect((await putReference(s, u.id, webm(), 'a', ownAdminish)).statusCode).toBe(403);
    expect(
      (await s.req({ method: 'DELETE', url: `/users/${u.id}/reference-video`, key: ownKey })).statusCode,
    ).toBe(403);
    // Password only (level 2) for a user with password + TOTP: 401 with an intent.
    const weak = await signIn(s, u, { password: true }, { level: 2 });
    const refused = await send(weak, 'PUT', `/users/${u.id}/reference-video`, webm(), {
      'x-magic-words': 'a',
    });
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['x-error-code']).toBe('Insufficient Integrity');
    expect(refused.json().RequiredLevel).toBe(3);
    expect((await s.req({ url: `/users/${u.id}/reference-video` })).statusCode).toBe(404);
    // Both factors: allowed; a replacement ends the user's other sessions.
    const strong = await signIn(s, u, { password: true, totp: true }, { level: 3 });
    expect(
      (await send(strong, 'PUT', `/users/${u.id}/reference-video`, webm(), { 'x-magic-words': 'one' }))
        .statusCode,
    ).toBe(204);
    const bystander = await signIn(s, u, { password: true, totp: true }, { level: 3 });
    expect(
      (await send(strong, 'PUT', `/users/${u.id}/reference-video`, webm(), { 'x-magic-words': 'two' }))
        .statusCode,
    ).toBe(204);
    expect((await bystander.req({ url: '/users/me' })).statusCode).toBe(401);
    expect((await strong.req({ url: '/users/me' })).statusCode).toBe(200);
    // Someone else's session (not an administrator) may not set it.
    const other = await account(s, { tag: 'other' });
    const o = await signIn(s, other, { password: true }, { level: 2 });
    expect(
      (await send(o, 'PUT', `/users/${u.id}/reference-video`, webm(), { 'x-magic-words': 'x' })).statusCode,
    ).toBe(403);
  });

  it('checks the body and the words: 415 not WebM, 413 above 20 MiB, 400 bad X-Magic-Words', async () => {
    const u = await account(s, { tag: 'ref' });
    expect((await putReference(s, u.id, Buffer.from('RIFF....AVI LIST'))).statusCode).toBe(415);
    expect(
      (await putReference(s, u.id, webm(), 'a', undefined, { 'content-type': 'video/mp4' })).statusCode,
    ).toBe(415);
    expect((await putReference(s, u.id, webm(20 * 1024 * 1024 + 10))).statusCode).toBe(413);
    for (const words of ['', 'a,,b', '<script>', Array(13).fill('w').join(','), 'x'.repeat(41)])
      expect((await putReference(s, u.id, webm(), words)).statusCode, words).toBe(400);
    expect((await s.req({ url: `/users/${u.id}/reference-video` })).statusCode).toBe(404);
  });
});

describe('the WebM header check', () => {
  it('accepts a WebM EBML header followed by anything, at any split of the bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.nat({ max: EBML_HEADER.length }), (tail, cut) => {
        const file = Buffer.concat([EBML_HEADER, Buffer.from(tail)]);
        expect(checkWebmHeader(file)).toBe('ok');
        // A prefix shorter than the header asks for more; it never accepts early.
        expect(checkWebmHeader(file.subarray(0, cut))).toBe(cut >= EBML_HEADER.length ? 'ok' : 'more');
      }),
    );
  });

  it('refuses anything that does not start with the EBML magic, and EBML documents of another type', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 4, maxLength: 200 }), (bytes) => {
        const b = Buffer.from(bytes);
        fc.pre(!b.subarray(0, 4).equals(EBML_MAGIC));
        expect(checkWebmHeader(b)).not.toMatch(/^(ok|more)$/);
      }),
    );
    const mkv = Buffer.from(EBML_HEADER);
    mkv.write('mkv!', EBML_HEADER.indexOf('webm'), 'latin1');
    expect(checkWebmHeader(mkv)).toMatch(/not WebM/);
    // Random bytes inside a well-formed EBML header never pass as WebM unless DocType says webm.
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 31, maxLength: 31 }), (inner) => {
        const b = Buffer.concat([EBML_MAGIC, Buffer.from([0x9f]), Buffer.from(inner)]);
        const verdict = checkWebmHeader(b);
        if (verdict === 'ok')
          expect(b.includes(Buffer.from([0x42, 0x82, 0x84, 0x77, 0x65, 0x62, 0x6d]))).toBe(true);
      }),
    );
  });

  it('parses X-Magic-Words strictly', () => {
    expect(parseMagicWords('apple, banjo')).toEqual(['apple', 'banjo']);
    fc.assert(
      fc.property(fc.string(), (raw) => {
        const r = parseMagicWords(raw);
        if (typeof r !== 'string') for (const w of r) expect(w).toMatch(/^[A-Za-z0-9][A-Za-z0-9 '-]{0,39}$/);
      }),
    );
  });
});
