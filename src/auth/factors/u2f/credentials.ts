import { isIP } from 'node:net';
import { ApiError } from '../../../core/errors.js';
import type { Doc } from '../../../schema/fields.js';
import type { ServiceContext } from '../../../store/service.js';
import { tenantDoc } from '../../integrity.js';

/**
 * Security keys and passkeys (WebAuthn credentials) as stored: a list in the user's hidden state
 * (`WebAuthnCredentials`). Nothing here is secret (a public key, a counter), but it is kept out
 * of the User object so that only the enrolment endpoints show it.
 */
export interface StoredCredential {
  /** The credential ID (base64url), as the authenticator names it. */
  ID: string;
  /** COSE public key (base64url). */
  PublicKey: string;
  /** The signature counter last seen; 0 for authenticators that keep none. */
  Counter: number;
  Transports: string[];
  /** The authenticator verified its user (PIN, biometric) when the key was registered. */
  UserVerified: boolean;
  /** Bound to one device (backup-eligible flag clear): not a synced passkey. */
  DeviceBound: boolean;
  /** A discoverable credential (passkey): signs in without the e-mail step. */
  Discoverable: boolean;
  Name: string;
  AAGUID: string;
  CreateTime: string;
  LastUsed: string;
}

/** At most this many keys per user (each one is an entry in allowCredentials). */
export const MAX_CREDENTIALS = 20;
/** How long a challenge may be answered. */
export const CHALLENGE_MS = 2 * 60_000;

export function credentialsOf(secret: Doc): StoredCredential[] {
  const v = secret.WebAuthnCredentials;
  return Array.isArray(v) ? (v as StoredCredential[]) : [];
}

/** The credentials a user has and what they can prove (src/auth/integrity.ts kinds). */
export const hasAny = (secret: Doc) => credentialsOf(secret).length > 0;
export const hasVerifying = (secret: Doc) => credentialsOf(secret).some((c) => c.UserVerified);
export const hasHardware = (secret: Doc) =>
  credentialsOf(secret).some((c) => c.UserVerified && c.DeviceBound);

/**
 * The relying party: the origin the ceremonies must come from and the RP ID (its host name), from
 * configuration only (Tenant.SigninURL, else server.signinurl), never from the request's Host:
 * a request can name any host, and a key registered for a host an attacker chose would answer
 * that host's challenges. Without a configured sign-in URL there is no relying party: 409.
 */
export interface RelyingParty {
  id: string;
  origin: string;
  name: string;
}

export async function relyingParty(ctx: ServiceContext): Promise<RelyingParty> {
  const tenant = await tenantDoc(ctx);
  const configured = String(tenant.SigninURL ?? '') || ctx.config.server.signinurl;
  let url: URL | undefined;
  try {
    url = configured ? new URL(configured) : undefined;
  } catch {
    url = undefined;
  }
  const host = url?.hostname.replace(/^\[|\]$/g, '') ?? '';
  if (!url || !/^https?:$/.test(url.protocol) || host === '' || isIP(host) !== 0)
    throw new ApiError(
      'Conflict',
      'security keys need the sign-in URL configured (Tenant.SigninURL or server.signinurl) with a host name, not an IP address: WebAuthn binds each key to it',
    );
  return { id: host, origin: url.origin, name: String(tenant.Name || 'Gatehouse') };
}

/** A user handle (WebAuthn user.id) is the Gatehouse user ID's bytes. */
export const userHandle = (userId: string) => new TextEncoder().encode(userId);
export const userOfHandle = (handle: string) => Buffer.from(handle, 'base64url').toString('utf8');

/** The public view of a credential (GET /auth/enroll/u2f). */
export const publicView = (c: StoredCredential) => ({
  ID: c.ID,
  Name: c.Name,
  Passkey: c.Discoverable,
  DeviceBound: c.DeviceBound,
  UserVerified: c.UserVerified,
  CreateTime: c.CreateTime,
  LastUsed: c.LastUsed,
});
