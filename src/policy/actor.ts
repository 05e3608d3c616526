import type { Principal } from '../schema/principal.js';

/**
 * Who asks the policy: a principal (an API key or a session, with its scopes), or an App's own
 * credential (its proxy token, as the access proxy or a provisioning agent; its OpenID client),
 * which acts for the App and holds no scopes, only the users the App serves.
 */
export type Actor = Principal | AppActor;

export interface AppActor {
  via: 'app';
  appId: string;
  credential: 'proxy' | 'agent' | 'oidc';
}

export const isAppActor = (a: Actor): a is AppActor => a.via === 'app';

/** The service itself (bootstrap, sweeps, scripts' effects): authorized by construction, never by a request. */
export const SYSTEM: Principal = { via: 'apikey', userId: '', scopes: new Set(['admin']), keyId: 'system' };

export function describeActor(a: Actor): string {
  if (isAppActor(a)) return `App ${a.appId} (${a.credential} credential)`;
  const scopes = [...a.scopes].sort().join(', ') || 'no scopes';
  if (a.via === 'session') return `user ${a.userId} (session at level ${a.integrityLevel ?? 0}: ${scopes})`;
  return a.userId
    ? `API key ${a.keyId ?? ''} of user ${a.userId} (${scopes})`
    : `API key ${a.keyId ?? ''} (${scopes})`;
}
