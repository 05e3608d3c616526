import type { FastifyReply, FastifyRequest } from 'fastify';

export const SESSION_COOKIE = 'gatehouse_session';
export const DEVICE_COOKIE = 'gatehouse_device';
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

/** Is the request over TLS (directly)? Cookies then get Secure. */
export const isTls = (req: FastifyRequest) => req.protocol === 'https';

function cookie(req: FastifyRequest, name: string, value: string, maxAge: number | undefined): string {
  const parts = [`${name}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax'];
  if (maxAge !== undefined) parts.push(`Max-Age=${maxAge}`);
  if (isTls(req)) parts.push('Secure');
  return parts.join('; ');
}

function append(reply: FastifyReply, value: string) {
  const prev = reply.getHeader('set-cookie');
  const list = prev === undefined ? [] : Array.isArray(prev) ? prev.map(String) : [String(prev)];
  // Replace an earlier cookie of the same name set in this response.
  const name = value.slice(0, value.indexOf('='));
  reply.header('set-cookie', [...list.filter((c) => !c.startsWith(`${name}=`)), value]);
}

/** Session cookie: a browser-session cookie (no Max-Age); the server enforces the lifetimes. */
export const setSessionCookie = (req: FastifyRequest, reply: FastifyReply, token: string) =>
  append(reply, cookie(req, SESSION_COOKIE, token, undefined));

export const clearSessionCookie = (req: FastifyRequest, reply: FastifyReply) =>
  append(reply, cookie(req, SESSION_COOKIE, '', 0));

export const setDeviceCookie = (req: FastifyRequest, reply: FastifyReply, deviceId: string) =>
  append(reply, cookie(req, DEVICE_COOKIE, deviceId, DEVICE_MAX_AGE));
