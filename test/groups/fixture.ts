import { expect } from 'vitest';
import type { TestService } from '../helpers.js';

/** Creates an object through the API and returns its ID. */
export async function create(s: TestService, path: string, body: Record<string, unknown>): Promise<string> {
  const res = await s.req({ method: 'POST', url: `/${path}`, payload: body });
  expect(res.statusCode, res.body).toBe(201);
  return res.headers['x-id'] as string;
}

let n = 0;
/** A user with an e-mail address and a user-scope key of their own. */
export async function person(
  s: TestService,
  name: string,
): Promise<{ id: string; key: string; email: string }> {
  n++;
  const email = `${name.toLowerCase().replace(/[^a-z0-9]/g, '')}${n}@example.com`;
  const id = await create(s, 'users', { Email: email, Name: { FullName: name } });
  return { id, key: await s.keyFor(['user'], id), email };
}

/** POST/DELETE a membership operation with an optional JSON reason. */
export function op(
  s: TestService,
  action: 'add' | 'remove' | 'activate' | 'approve' | 'reject' | 'unreject' | 'use',
  group: string,
  user: string,
  opts: { key?: string; reason?: string; form?: boolean } = {},
) {
  const url = `/groups/${group}/members/${user}${action === 'add' || action === 'remove' ? '' : `/${action}`}`;
  const method = action === 'remove' ? 'DELETE' : 'POST';
  if (opts.form)
    return s.req({
      method,
      url,
      key: opts.key,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams(opts.reason !== undefined ? { reason: opts.reason } : {}).toString(),
    });
  return s.req({
    method,
    url,
    key: opts.key,
    ...(opts.reason !== undefined ? { payload: { Reason: opts.reason } } : {}),
  });
}
