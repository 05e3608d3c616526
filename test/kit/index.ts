import { execFileSync } from 'node:child_process';
import type { LightMyRequestResponse } from 'fastify';
import * as OTPAuth from 'otpauth';
import { expect } from 'vitest';
import { User } from '../../src/objects/user.js';
import { Browser, makeUser, signedIn } from '../auth/client.js';
import type { TestService } from '../helpers.js';

/**
 * The steps that sign-in tests share, written once: set tenant settings, create a user with
 * factors, sign in (to a level). Everything goes through the HTTP API (the admin key's explicit
 * reset, `?user=`, is the one way an API key may set credentials); only secretOf() reads the
 * store. The cookie-keeping browser stand-in is test/auth/client.ts.
 */
export { Browser, makeUser, signedIn };

export const PW = 'correct horse battery staple';
export const PIN = '24682468';

// ---------------------------------------------------------------------------------------------
// Users by the admin key

/** POST /users with the admin key (201 expected): the new user's ID. */
export async function newUserWith(s: TestService, payload: Record<string, unknown> = {}): Promise<string> {
  const r = await s.req({ method: 'POST', url: '/users', payload });
  expect(r.statusCode, r.body).toBe(201);
  return String(r.headers['x-id']);
}

/** DELETE /users/:id with the admin key and the ETag just read (204 expected). */
export async function deleteUser(s: TestService, id: string): Promise<void> {
  const cur = await s.req({ url: `/users/${id}` });
  const r = await s.req({
    method: 'DELETE',
    url: `/users/${id}`,
    headers: { 'if-match': String(cur.headers.etag) },
  });
  expect(r.statusCode, r.body).toBe(204);
}

// ---------------------------------------------------------------------------------------------
// Tenant settings

/**
 * Changes Tenant fields: GET /tenant, then PUT it back with the changes and If-Match holding the
 * ETag just read. The PUT must answer one of `ok` (default 204; add 304 where the value may
 * already be set). Returns the PUT's response.
 */
export async function setTenant(
  s: TestService,
  patch: Record<string, unknown>,
  ok: number[] = [204],
): Promise<LightMyRequestResponse> {
  const t = await s.req({ url: '/tenant' });
  const r = await s.req({
    method: 'PUT',
    url: '/tenant',
    headers: { 'if-match': String(t.headers.etag) },
    payload: { ...(t.json() as Record<string, unknown>), ...patch },
  });
  if (ok.length === 1) expect(r.statusCode, r.body).toBe(ok[0]);
  else expect(ok, r.body).toContain(r.statusCode);
  return r;
}

// ---------------------------------------------------------------------------------------------
// TOTP codes

/** A TOTP code for `secret` from otpauth, `steps` time steps (30 s) from now. */
export function totpCode(secret: string, steps = 0): string {
  return new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), digits: 6, period: 30 }).generate({
    timestamp: Date.now() + steps * 30_000,
  });
}

/**
 * Waits, when needed, until at least `ms` are left in the current 30 s step. A test that takes a
 * code for a step relative to now (the previous one, say) and sends it a moment later fails when
 * a step boundary falls in between, which a loaded machine makes likely enough to be seen.
 */
export async function clearOfStepBoundary(ms = 4_000): Promise<void> {
  const left = 30_000 - (Date.now() % 30_000);
  if (left < ms) await new Promise((r) => setTimeout(r, left + 50));
}

/** A TOTP code that is not valid now (outside the ±1 step window the service accepts). */
export function wrongTotp(secret: string): string {
  const valid = new Set([-1, 0, 1].map((k) => totpCode(secret, k)));
  for (let k = 5; ; k++) if (!valid.has(totpCode(secret, k))) return totpCode(secret, k);
}

/**
 * Whether oathtool (an independent TOTP implementation) is installed. Under CI=true a missing
 * one is an error; locally the caller's tests are skipped with a printed reason.
 */
export function oathtoolInstalled(): boolean {
  try {
    execFileSync('oathtool', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    if (process.env.CI)
      throw new Error('oathtool is missing and CI=true: install it (apt-get install oathtool)');
    process.stdout.write(
      '\n*** oathtool not installed: TOTP tests against an independent implementation are skipped ***\n\n',
    );
    return false;
  }
}

/** A TOTP code from oathtool, optionally for another time. */
export const oathtool = (base32: string, at?: Date) =>
  execFileSync('oathtool', [
    '--totp',
    '-b',
    ...(at ? ['--now', at.toISOString().replace('T', ' ').slice(0, 19) + ' UTC'] : []),
    base32,
  ])
    .toString()
    .trim();

// ---------------------------------------------------------------------------------------------
// Users with factors

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
  // Under load the request can land in the next step, where the previous step's code is two steps
  // old: confirm with the current step's code then (each step counts once, and the next step's
  // code is still left for signing in).
  if (conf.statusCode === 403) {
    const again = await s.req({
      method: 'POST',
      url: `/auth/enroll/totp/confirm?user=${userId}`,
      payload: { Code: totpCode(secret, 0) },
    });
    expect(again.statusCode, again.body).toBe(204);
    return secret;
  }
  expect(conf.statusCode, conf.body).toBe(204);
  return secret;
}

/** Generates a user's backup codes with the admin key (an administrator's hand-over). */
export async function provisionBackup(s: TestService, userId: string): Promise<string[]> {
  const r = await s.req({ method: 'POST', url: `/auth/enroll/backup?user=${userId}`, payload: {} });
  expect(r.statusCode, r.body).toBe(200);
  return r.json().Codes as string[];
}

export interface Account {
  id: string;
  email: string;
  /** The TOTP secret (base32), when the account has one. */
  totp?: string;
  /** Backup codes not yet spent by signIn(), when the account has them. */
  backup?: string[];
}

let counter = 0;
/**
 * A user with an e-mail address and the factors asked for: password (PW) unless `password: false`,
 * PIN (PIN), TOTP (provisioned and confirmed), backup codes. Active unless `active: false`.
 */
export async function account(
  s: TestService,
  o: {
    password?: boolean;
    pin?: boolean;
    totp?: boolean;
    backup?: boolean;
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
  return {
    id,
    email,
    totp: o.totp ? await provisionTotp(s, id) : undefined,
    ...(o.backup ? { backup: await provisionBackup(s, id) } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// Signing in

let addresses = 0;
/**
 * A client address of its own for each browser, so that the per-address counters (regulation,
 * the e-mail lookup limit) of one test's browsers never decide another's outcome.
 */
export const freshIp = () =>
  `10.${80 + Math.floor(++addresses / 62500)}.${Math.floor(addresses / 250) % 250}.${(addresses % 250) + 1}`;

export interface Steps {
  password?: boolean;
  pin?: boolean;
  totp?: boolean;
  backup?: boolean;
}

/**
 * A browser that named the user and proved the given factors (each must succeed). With `level`,
 * the session must then be at exactly that integrity level (sign in *to a level*).
 */
export async function signIn(
  s: TestService,
  a: Account,
  steps: Steps,
  opts: { ip?: string; browser?: Browser; level?: number } = {},
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
  if (steps.backup) {
    const code = a.backup?.shift();
    expect(code, 'the account has no unspent backup code left').toBeDefined();
    const r = await b.post('/auth/backup', { code: code as string });
    expect(r.statusCode, r.body).toBe(204);
  }
  if (opts.level !== undefined) expect(await levelOf(b)).toBe(opts.level);
  return b;
}

/** The session's level as POST /auth reports it. */
export async function levelOf(b: Browser): Promise<number> {
  return (await b.post('/auth')).json().IntegrityLevel as number;
}

/** An HTTP-date, as X-Next-Attempt carries it. */
export const HTTP_DATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** Posts the same factor step `times` times in a row (e.g. wrong guesses); the status codes. */
export async function attempts(
  b: Browser,
  path: string,
  form: Record<string, string>,
  times: number,
): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < times; i++) out.push((await b.post(path, form)).statusCode);
  return out;
}

/** POST /auth: the session's AuthResponse. */
export async function authResponse(b: Browser, intent?: string): Promise<Record<string, unknown>> {
  const r = await b.post('/auth', intent ? { intent } : {});
  expect(r.statusCode, r.body).toBe(200);
  return r.json() as Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// Other objects the factors use

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
