import type { Scope } from './type.js';

/** Who is calling, however they proved it. Sessions (a later factor set) produce the same shape. */
export interface Principal {
  via: 'apikey' | 'session';
  /** The user acted for; '' for a key that belongs to no user. */
  userId: string;
  scopes: ReadonlySet<Scope>;
  /** The APIKey's ID when via is apikey. */
  keyId?: string;
  /** Public ID of the session when via is session (src/auth/session/). */
  sessionId?: string;
  /** The session's integrity level (0..4, src/auth/integrity.ts) when via is session. */
  integrityLevel?: number;
  /** The browser's long-lived device ID when via is session. */
  deviceId?: string;
}
