import type { FastifyReply, FastifyRequest } from 'fastify';
import { HOST_COOKIE_PREFIX, SERVICE_COOKIES } from '../../wire/proxy.js';

/** The cookies' names over plain HTTP; over TLS they carry the `__Host-` prefix (cookieName). */
export const SESSION_COOKIE = SERVICE_COOKIES.session;
export const DEVICE_COOKIE = SERVICE_COOKIES.device;
/** Browsers cap cookie lifetimes at 400 days. */
const DEVICE_MAX_AGE = 400 * 86400;

/** Cookies of the request; a name given twice counts as absent (ambiguous, maybe injected). */
export function readCookies(req: FastifyRequest): Map<string, string> {
  const out = new Map<string, string>();
  const dup = new Set<string>();
  const header = req.headers.cookie;
  if (typeof header !== 'string') return out;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    const name = part.slice(0, i).trim();
    const value = part.slice(i + 1).trim();
    if (out.has(name)) dup.add(name);
    out.set(name, value);
  }
  for (const d of dup) out.delete(d);
  return out;
}

/**
 * Is the request over TLS (directly, or says a proxy listed in server.trustproxy)? Cookies then
 * get Secure and the `__Host-` prefix.
 */
export const isTls = (req: FastifyRequest) => req.protocol === 'https';

/**
 * A cookie's name on this request. Over TLS it is `__Host-<name>`: browsers accept such a cookie
 * only from a secure origin, host-only (no Domain) with Path=/, so a sibling host (or an app under
 * a shared parent domain) cannot plant one, and only that name is read. Plain HTTP (development)
 * keeps the plain name: a browser refuses `__Host-` cookies there.
 */
export const cookieName = (req: FastifyRequest, name: string) =>
  isTls(req) ? `${HOST_COOKIE_PREFIX}${name}` : name;

/** The request's session token and device ID cookies, by the names this request uses. */
export function serviceCookies(req: FastifyRequest): { session?: string; device?: string } {
  const cookies = readCookies(req);
  return {
    session: cookies.get(cookieName(req, SESSION_COOKIE)),
    device: cookies.get(cookieName(req, DEVICE_COOKIE)),
  };
}

function cookie(req: FastifyRequest, name: string, value: string, maxAge: number | undefined): string {
  // Path=/, Secure over TLS and no Domain: what the __Host- prefix requires.
  const parts = [`${cookieName(req, name)}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax'];
  if (maxAge !== undefined) parts.push(`Max-Age=${maxAge}`);
  if (isTls(req)) parts.push('Secure');
  return parts.join('; ');
}

function append(reply: FastifyReply, value: string) {
  const prev = reply.getHeader('set-cookie');
  const list = prev === undefined ? [] : Array.isArray(prev) ? prev.map(String) : [String(prev)];
  // Replace an earlier cookie of the same name set in this response. Fastify's reply.header adds
  // to a Set-Cookie already there rather than replacing it, so the old list is removed first.
  const name = value.slice(0, value.indexOf('='));
  reply.removeHeader('set-cookie');
  reply.header('set-cookie', [...list.filter((c) => !c.startsWith(`${name}=`)), value]);
}

/** Session cookie: a browser-session cookie (no Max-Age); the server enforces the lifetimes. */
export const setSessionCookie = (req: FastifyRequest, reply: FastifyReply, token: string) =>
  append(reply, cookie(req, SESSION_COOKIE, token, undefined));

export const clearSessionCookie = (req: FastifyRequest, reply: FastifyReply) =>
  append(reply, cookie(req, SESSION_COOKIE, '', 0));

export const setDeviceCookie = (req: FastifyRequest, reply: FastifyReply, deviceId: string) =>
  append(reply, cookie(req, DEVICE_COOKIE, deviceId, DEVICE_MAX_AGE));
