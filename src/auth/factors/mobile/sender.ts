import webpush from 'web-push';
import { splitList } from '../../../config/server.js';
import type { ServiceContext } from '../../../store/service.js';
import { vapidKeys } from '../../session/keys.js';
import type { MobileDevice } from './store.js';

/** Bound on each push request (connect to answer). */
const PUSH_TIMEOUT_MS = 10_000;

/**
 * Is `endpoint` on one of the push services of `push.endpoints`? An origin matches exactly; a
 * `*.` entry matches its subdomains. Anything else (other hosts, credentials in the URL, other
 * schemes) is refused: the service must not be made to post to an address of someone's choosing.
 */
export function allowedEndpoint(allowed: string, endpoint: string): boolean {
  let u: URL;
  try {
    u = new URL(endpoint);
  } catch {
    return false;
  }
  if (u.username || u.password || (u.protocol !== 'https:' && u.protocol !== 'http:')) return false;
  return splitList(allowed).some((entry) => {
    const m = /^(https?:)\/\/(\*\.)?(.+)$/i.exec(entry);
    if (!m || m[1]?.toLowerCase() !== u.protocol) return false;
    const host = (m[3] as string).toLowerCase();
    return m[2] ? u.host.endsWith(`.${host}`) : u.host === host;
  });
}

/** The VAPID subject: push.subject, else the https sign-in URL, else a mailto: placeholder. */
export function vapidSubject(ctx: ServiceContext, signinBase: string): string {
  if (ctx.config.push.subject) return ctx.config.push.subject;
  return signinBase.startsWith('https://') ? new URL(signinBase).origin : 'mailto:gatehouse@localhost';
}

export type PushOutcome = 'sent' | 'gone' | 'failed';

/**
 * Sends one encrypted message (RFC 8291 aes128gcm, VAPID RFC 8292) to a device. 'gone' when the
 * push service says the subscription no longer exists (404, 410): the caller forgets the device.
 */
export async function pushTo(
  ctx: ServiceContext,
  device: MobileDevice,
  payload: string,
  subject: string,
  ttlSeconds: number,
): Promise<PushOutcome> {
  if (!allowedEndpoint(ctx.config.push.endpoints, device.Endpoint)) return 'failed';
  const keys = await vapidKeys(ctx);
  // web-push encrypts and signs; the request itself is ours (fetch: a bound on the whole
  // exchange, no redirects, and http as well as https for a push service an operator lists).
  const details = webpush.generateRequestDetails(
    { endpoint: device.Endpoint, keys: { p256dh: device.P256dh, auth: device.Auth } },
    payload,
    {
      vapidDetails: { subject, publicKey: keys.publicKey, privateKey: keys.privateKey },
      TTL: ttlSeconds,
      urgency: 'high',
      contentEncoding: 'aes128gcm',
    },
  );
  try {
    const res = await fetch(details.endpoint, {
      method: details.method,
      headers: details.headers as Record<string, string>,
      body: details.body ? new Uint8Array(details.body) : null,
      signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
      redirect: 'error',
    });
    await res.arrayBuffer().catch(() => undefined);
    if (res.ok) return 'sent';
    if (res.status === 404 || res.status === 410) return 'gone';
    ctx.logger.warn({ status: res.status, device: device.ID }, 'a push message was not accepted');
    return 'failed';
  } catch (err) {
    ctx.logger.warn(
      { device: device.ID, reason: (err as Error).message },
      'a push service could not be reached',
    );
    return 'failed';
  }
}
