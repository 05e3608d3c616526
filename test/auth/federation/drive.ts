/** Steps of a relying-party sign-in over fastify inject (the service) and real HTTP (the provider). */
import { expect } from 'vitest';
import type { TestService } from '../../helpers.js';
import type { Browser } from '../client.js';

/** The service's origin as fastify inject presents it (the Host it sends). */
export const SERVICE_ORIGIN = 'http://localhost';
export const callbackUri = (appId: string) => `${SERVICE_ORIGIN}/auth/oauth2rp/${appId}/callback`;

/** POST /auth/oauth2rp/:appID; returns the authorization URL the browser is to go to. */
export async function start(b: Browser, appId: string, form: Record<string, string> = {}): Promise<URL> {
  const r = await b.post(`/auth/oauth2rp/${appId}`, form);
  expect(r.statusCode, r.body).toBe(200);
  return new URL(r.json().URL as string);
}

/**
 * Follows the provider's redirects (with its cookies) from the authorization URL until one leads
 * back to the service: returns that callback URL (code, state, iss).
 */
export async function atProvider(url: URL | string, method = 'GET', body?: string): Promise<URL> {
  const jar = new Map<string, string>();
  let next = new URL(url);
  let m = method;
  let payload = body;
  for (let i = 0; i < 10; i++) {
    if (next.origin === SERVICE_ORIGIN) return next;
    const headers: Record<string, string> = {};
    if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (payload !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const r = await fetch(next, { method: m, headers, body: payload, redirect: 'manual' });
    for (const c of r.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = (pair ?? '').indexOf('=');
      jar.set((pair ?? '').slice(0, at), (pair ?? '').slice(at + 1));
    }
    const loc = r.headers.get('location');
    if (!loc) throw new Error(`the provider answered ${r.status} without a redirect: ${await r.text()}`);
    next = new URL(loc, next);
    m = 'GET';
    payload = undefined;
  }
  throw new Error('too many redirects at the provider');
}

/** Delivers a callback URL to the service in the browser `b`. */
export function deliver(b: Browser, cb: URL) {
  return b.req({ url: `${cb.pathname}${cb.search}` });
}

/** The whole sign-in: start, the provider, the callback; returns the callback's response. */
export async function signInWith(b: Browser, appId: string, form: Record<string, string> = {}) {
  return deliver(b, await atProvider(await start(b, appId, form)));
}

/** POST /auth: who the browser's session is now. */
export async function whoAmI(b: Browser) {
  const r = await b.post('/auth');
  expect(r.statusCode, r.body).toBe(200);
  return r.json() as { UserID: string; IntegrityLevel: number; Email: string; Proven: string[] };
}

/** Creates an App with OAuth2 relying-party settings (and a client secret); returns its ID. */
export async function createProviderApp(
  s: TestService,
  name: string,
  oauth2: Record<string, unknown>,
  secret?: string,
): Promise<string> {
  const r = await s.req({
    method: 'POST',
    url: '/apps',
    payload: { Name: name, OAuth2: oauth2, ...(secret ? { OAuth2ClientSecret: secret } : {}) },
  });
  expect(r.statusCode, r.body).toBe(201);
  return String(r.headers['x-id']);
}

/** Changes an App's OAuth2 settings (GET, then PUT with If-Match). */
export async function setOAuth2(s: TestService, appId: string, patch: Record<string, unknown>) {
  const g = await s.req({ url: `/apps/${appId}` });
  const doc = g.json() as Record<string, unknown>;
  const r = await s.req({
    method: 'PUT',
    url: `/apps/${appId}`,
    headers: { 'if-match': String(g.headers.etag) },
    payload: { ...doc, OAuth2: { ...(doc.OAuth2 as Record<string, unknown>), ...patch } },
  });
  expect([204, 304], r.body).toContain(r.statusCode);
}
