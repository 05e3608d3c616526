import * as OTPAuth from 'otpauth';
import { expect } from 'vitest';
import { User } from '../../src/objects/user.js';
import { Browser, makeUser } from '../auth/client.js';
import type { TestService } from '../helpers.js';

/**
 * Accounts with factors for the sign-in attack suites (credentials, activation, throttle): made
 * with the admin key's explicit reset (`?user=`), the one way an API key may set credentials.
 */
export const PW = 'correct horse battery staple';
export const PIN = '24682468';

/** A TOTP code for `secret`, `steps` time steps (30 s) from now. */
export function totpCode(secret: string, steps = 0): string {
  return new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), digits: 6, period: 30 }).generate({
    timestamp: Date.now() + steps * 30_000,
  });
}

/**
 * Provisions TOTP for a user with the admin key, confirmed with the previous step's code, so that
 * the current and the next step's codes remain usable for signing in.
 */
export async function provisionTotp(s: TestService, userId: string): Promise<string> {
  const start = await s.req({ method: 'POST', url: `/auth/enroll/totp?user=${userId}`, payload: {} });
  expect(start.statusCode, start.body).toBe(200);
  const secret = start.json().Secret as string;
  const conf = await s.req({
    method: 'POST',
    url: `/auth/enroll/totp/confirm?user=${userId}`,
    payload: { Code: totpCode(secret, -1) },
  });
  expect(conf.statusCode, conf.body).toBe(204);
  return secret;
}

export interface Account {
  id: string;
  email: string;
  totp?: string;
}

let counter = 0;
/** A user with an e-mail address and the factors asked for. */
export async function account(
  s: TestService,
  o: {
    password?: boolean;
    pin?: boolean;
    totp?: boolean;
    admin?: boolean;
    active?: boolean;
    tag?: string;
  } = {},
): Promise<Account> {
  const email = `${o.tag ?? 'acct'}${++counter}-${Date.now().toString(36)}@example.com`;
  const id = await makeUser(s, {
    email,
    password: o.password === false ? undefined : PW,
    pin: o.pin ? PIN : undefined,
    admin: o.admin,
    active: o.active,
  });
  return { id, email, totp: o.totp ? await provisionTotp(s, id) : undefined };
}

let addresses = 0;
/**
 * A client address of its own for each browser, so that the per-address counters (regulation,
 * the e-mail lookup limit) of one test's browsers never decide another's outcome.
 */
export const freshIp = () =>
  `10.${80 + Math.floor(++addresses / 62500)}.${Math.floor(addresses / 250) % 250}.${(addresses % 250) + 1}`;

/** A browser that named the user and proved the given factors (each must succeed). */
export async function signIn(
  s: TestService,
  a: Account,
  steps: { password?: boolean; pin?: boolean; totp?: boolean },
  opts: { ip?: string; browser?: Browser } = {},
): Promise<Browser> {
  const b = opts.browser ?? new Browser(s, { ip: opts.ip ?? freshIp() });
  const e = await b.post('/auth/email', { email: a.email });
  expect(e.statusCode, e.body).toBe(204);
  if (steps.password) expect((await b.post('/auth/password', { password: PW })).statusCode).toBe(204);
  if (steps.pin) expect((await b.post('/auth/pin', { code: PIN })).statusCode).toBe(204);
  if (steps.totp) {
    // The current step may be spent by an earlier sign-in in the same test: try it, then the next.
    let r = await b.post('/auth/totp', { code: totpCode(a.totp as string) });
    if (r.statusCode === 403) r = await b.post('/auth/totp', { code: totpCode(a.totp as string, 1) });
    expect(r.statusCode, r.body).toBe(204);
  }
  return b;
}

/** The session's level as POST /auth reports it. */
export async function levelOf(b: Browser): Promise<number> {
  return (await b.post('/auth')).json().IntegrityLevel as number;
}

/** Changes Tenant fields (If-Match with the current ETag). */
export async function patchTenant(s: TestService, patch: Record<string, unknown>): Promise<void> {
  const t = await s.req({ url: '/tenant' });
  const r = await s.req({
    method: 'PUT',
    url: '/tenant',
    headers: { 'if-match': String(t.headers.etag) },
    payload: { ...(t.json() as object), ...patch },
  });
  expect(r.statusCode, r.body).toBe(204);
}

/** The user's hidden state, to check that a refused change left the credentials as they were. */
export const secretOf = (s: TestService, id: string) => s.store.getSecret(User, id);

/** Creates an ActivationCode with the admin key; returns its ID. */
export async function activationCode(
  s: TestService,
  body: { Code: string; UserID?: string; GroupID?: string; MaxUses?: number; ExpireTime?: string },
): Promise<string> {
  const r = await s.req({ method: 'POST', url: '/activationcodes', payload: body });
  expect(r.statusCode, r.body).toBe(201);
  return String(r.headers['x-id']);
}
