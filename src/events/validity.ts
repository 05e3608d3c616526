import type { Principal } from '../auth/principal.js';
import { timestampMs } from '../schema/fields.js';
import type { Outgoing } from './subscription.js';

// How long a stream's credentials stay good, read from the objects they come from (EventHub).

/**
 * Whose streams count together: the user's, else the key's or the session's. A session still
 * signing in (no scopes: it follows its own Auth only) counts as itself: anyone who types a user's
 * e-mail address gets such a session, and its streams must not use up the user's own quota.
 */
export const streamHolder = (p: Principal) =>
  p.via === 'session' && p.scopes.size === 0
    ? `s:${p.sessionId ?? ''}`
    : p.userId !== ''
      ? `u:${p.userId}`
      : p.keyId
        ? `k:${p.keyId}`
        : `s:${p.sessionId ?? ''}`;

/** Why an updated API key no longer grants what the stream was opened with, or undefined. */
export function keyStillGrants(o: Outgoing, p: Principal): string | undefined {
  if (o.change.data === null) return 'the API key was deleted';
  const doc = o.parsed;
  const scopes = new Set(Array.isArray(doc.Scopes) ? (doc.Scopes as string[]) : []);
  const same = scopes.size === p.scopes.size && [...p.scopes].every((s) => scopes.has(s));
  if (!same || String(doc.UserID ?? '') !== p.userId) return "the API key's scopes or user changed";
  if (Date.now() >= expiryOf(doc.ExpireTime)) return 'the API key expired';
  return undefined;
}

/** When a SuspendAfter starts a suspension, as epoch ms; never (Infinity) for the zero time. */
export function suspensionOf(value: unknown): number {
  const t = timestampMs(String(value));
  return Number.isFinite(t) ? t : Number.POSITIVE_INFINITY;
}

/** An ExpireTime as epoch ms; never (Infinity) for the zero time. */
export function expiryOf(value: unknown): number {
  const t = timestampMs(String(value));
  return Number.isFinite(t) && t > 0 ? t : Number.POSITIVE_INFINITY;
}
