import type { Factor } from '../factor.js';
import { hasAny, hasHardware, hasVerifying } from './credentials.js';
import { registerEnrolment } from './enroll.js';
import { registerSignin } from './signin.js';

/** How people read the three proofs: one choice, "security key". */
const KEY_WORDS = { label: 'security key', proof: 'your security key or passkey' };

/**
 * Security keys and passkeys (WebAuthn, @simplewebauthn/server). One set of endpoints, three
 * proofs, because what an assertion proves depends on the key and on the assertion:
 *
 * - `u2f` (kind hardware, level 4): a key bound to one device (not a synced passkey) that verified
 *   its holder (PIN, biometric) in this assertion;
 * - `u2f_uv` (kind verified, two factors): a key that verified its holder but may be synced;
 * - `u2f_up` (kind possession): a key that only saw a touch (user presence).
 *
 * A user is enrolled in each proof their registered keys can give (`enrolled`), so the reachable
 * level, the sign-in pages and the step-up rule follow the best key the user has. Endpoints:
 * ./signin.ts (POST /auth/u2f/start, /auth/u2f/finish), ./enroll.ts (/auth/enroll/u2f...).
 */
export const u2fFactor: Factor = {
  name: 'u2f',
  kind: 'hardware',
  words: KEY_WORDS,
  form: { rank: 10, client: 'webauthn' },
  settings: { title: 'Security keys and passkeys', rank: 40, client: 'webauthn' },
  enrolled: (_user, secret) => hasHardware(secret),
  register(app, ctx) {
    registerSignin(app, ctx);
    registerEnrolment(app, ctx);
  },
};

/** A proof a key gives through the one security-key choice (the u2f factor's endpoints). */
const proofOnly = (name: string, kind: Factor['kind'], enrolled: Factor['enrolled']): Factor => ({
  name,
  kind,
  enrolled,
  words: KEY_WORDS,
  form: { choiceOf: 'u2f' },
});

export const u2fFactors: Factor[] = [
  u2fFactor,
  proofOnly('u2f_uv', 'verified', (_user, secret) => hasVerifying(secret)),
  proofOnly('u2f_up', 'possession', (_user, secret) => hasAny(secret)),
];
