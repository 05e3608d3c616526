import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { TestService } from '../../../helpers.js';
import { type Account, account, type Browser } from '../../../kit/index.js';

/**
 * Shared steps of the vouching tests: WebM-shaped bytes, reference videos, a group of colleagues.
 * The bytes are a real EBML header (DocType "webm", as Chromium's MediaRecorder writes it) and
 * random content; the browser test (browser.test.ts) records real WebM with MediaRecorder.
 */
export const EBML_HEADER = Buffer.from(
  '1a45dfa39f4286810142f7810142f2810442f381084282847765626d4287810442858102',
  'hex',
);

/** `size` bytes that start like a WebM file. */
export function webm(size = 4096): Buffer {
  const rest = randomBytes(Math.max(0, size - EBML_HEADER.length));
  return Buffer.concat([EBML_HEADER, rest]).subarray(0, size);
}

/** Sends raw bytes from a browser (its cookies, the CSRF header). */
export async function send(
  b: Browser,
  method: 'POST' | 'PUT' | 'GET' | 'DELETE',
  url: string,
  body?: Buffer,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  const res = await b.s.app.inject({
    method,
    url,
    payload: body,
    remoteAddress: b.opts.ip ?? '127.0.0.1',
    headers: {
      cookie: [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      'x-requested-with': 'test',
      ...(body ? { 'content-type': 'video/webm' } : {}),
      ...headers,
    },
  });
  // Keep the browser's cookies as Browser.req does (a raised session gets a new token).
  const set = res.headers['set-cookie'];
  for (const c of set === undefined ? [] : Array.isArray(set) ? set : [set]) {
    const pair = c.split(';')[0] ?? '';
    const i = pair.indexOf('=');
    if (pair.slice(i + 1) === '' || /Max-Age=0/i.test(c)) b.cookies.delete(pair.slice(0, i));
    else b.cookies.set(pair.slice(0, i), pair.slice(i + 1));
  }
  return res;
}

/** PUT /users/:id/reference-video with a key (the admin key by default). */
export function putReference(
  s: TestService,
  userId: string,
  body: Buffer,
  words = 'apple,banjo,cactus',
  key?: string,
  headers: Record<string, string> = {},
) {
  return s.req({
    method: 'PUT',
    url: `/users/${userId}/reference-video`,
    payload: body,
    key,
    headers: { 'content-type': 'video/webm', 'x-magic-words': words, ...headers },
  });
}

/** A group that RequiresApproval, with the given users added (active) by the admin key. */
export async function teamOf(s: TestService, users: string[], opts: { open?: boolean } = {}) {
  const g = await s.req({
    method: 'POST',
    url: '/groups',
    payload: { Name: `team-${randomBytes(4).toString('hex')}`, RequiresApproval: opts.open !== true },
  });
  expect(g.statusCode, g.body).toBe(201);
  const id = String(g.headers['x-id']);
  for (const u of users) {
    const r = await s.req({ method: 'POST', url: `/groups/${id}/members/${u}`, payload: {} });
    expect(r.statusCode, r.body).toBeLessThan(300);
  }
  return id;
}

/** A requester with password + TOTP and a reference video, and a colleague with the same factors. */
export async function requesterAndColleague(s: TestService) {
  const requester: Account = await account(s, { totp: true, tag: 'req' });
  const colleague: Account = await account(s, { totp: true, tag: 'col' });
  const reference = webm(300_000);
  expect((await putReference(s, requester.id, reference)).statusCode).toBe(204);
  const group = await teamOf(s, [requester.id, colleague.id]);
  return { requester, colleague, reference, group };
}
