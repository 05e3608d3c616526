import type { FastifyRequest } from 'fastify';
import { insideRegions } from '../core/regions.js';
import type { Doc } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';
import { tenantCacheOf } from './tenantcache.js';

/**
 * The integrity scale: how sure the service is about who holds a session. Ordered; a session
 * may do whatever its level or any lower level allows. Documented in docs/signin.md.
 */
export const Level = {
  None: 0,
  /** An e-mail address named the user (POST /auth/email): nothing proven yet. */
  Identified: 1,
  /** One factor proven (password, PIN, TOTP, backup code), or an enrolment invitation (activation code). */
  OneFactor: 2,
  /** Factors of two different kinds proven (something known + something held). */
  TwoFactors: 3,
  /**
   * A hardware-backed factor: a security key or passkey bound to one device (not synced) that
   * verified its holder (PIN or biometric) in this very assertion (src/auth/factors/u2f).
   */
  Hardware: 4,
} as const;
export type IntegrityLevel = (typeof Level)[keyof typeof Level];
export const LEVEL_NAMES = ['none', 'identified', 'one factor', 'two factors', 'hardware-backed'];

/**
 * What kind of proof each factor is; two different kinds make two factors. 'invitation' is an
 * activation code: it proves an enrolment invitation, not the person, so it lifts a session to
 * OneFactor on its own (enough to enrol and activate) and never combines into TwoFactors.
 */
export type FactorKind = 'knowledge' | 'possession' | 'verified' | 'hardware' | 'delegated' | 'invitation';
/*
 * 'verified' is a key that verified its holder (WebAuthn user verification) but is not bound to
 * one device (a synced passkey): something held, unlocked by something known or inherent, so it
 * counts as both possession and knowledge (two factors on its own). 'hardware' is such a key
 * bound to one device: level 4.
 */
/**
 * Each factor's kind by name, filled from the factors' own declarations (`Factor.kind`) by the
 * registry, src/auth/factors/index.ts, when it loads. Until then it is empty, and every level
 * computed from it is the lowest (fail closed).
 */
// module-state: filled once as the factor registry loads (src/auth/factors/index.ts): code, the same for every service.
export const FACTOR_KINDS: Record<string, FactorKind> = {};

/** The level that proofs of these kinds earn together (invitations excluded: see FactorKind). */
export function levelOfKinds(kinds: Iterable<FactorKind | undefined>): number {
  const real = new Set([...kinds].filter((k) => k !== undefined && k !== 'invitation'));
  if (real.has('hardware')) return Level.Hardware;
  if (real.delete('verified')) real.add('knowledge').add('possession');
  if (real.size >= 2) return Level.TwoFactors;
  if (real.size === 1) return Level.OneFactor;
  return Level.Identified;
}

/** The level a set of proven factors earns (boosts are stored as a floor, see sessions.ts). */
export function levelOf(identified: boolean, factors: readonly string[], floor = 0): number {
  if (!identified) return Math.max(Level.None, floor);
  const kinds = factors.map((f) => FACTOR_KINDS[f]);
  let level = levelOfKinds(kinds);
  if (level < Level.OneFactor && kinds.includes('invitation')) level = Level.OneFactor;
  return Math.max(level, floor);
}

/**
 * What the session's holder has proven about themselves: its level without the activation code
 * (an invitation). Credential changes and administrator rights are decided on this level.
 */
export function provenLevel(s: {
  userId: string;
  factors: readonly string[];
  data: { BoostLevel?: number; FederatedLevel?: number };
}): number {
  const own = s.factors.filter((f) => FACTOR_KINDS[f] !== 'invitation');
  return levelOf(s.userId !== '', own, sessionFloor(s.data));
}

/**
 * The level a session never drops below: a boost from another session, or the level an upstream
 * identity provider's sign-in gives (App.OAuth2.Level, raised by acr/amr; docs/federation.md).
 */
export const sessionFloor = (d: { BoostLevel?: number; FederatedLevel?: number }) =>
  Math.max(d.BoostLevel ?? 0, d.FederatedLevel ?? 0);

/** Operation classes with a configurable required level (Tenant.Integrity*). */
export type OperationClass = 'read' | 'write' | 'credentials' | 'admin';
export const CLASS_DEFAULTS: Record<OperationClass, number> = {
  read: Level.OneFactor,
  write: Level.OneFactor,
  credentials: Level.OneFactor,
  admin: Level.TwoFactors,
};
const TENANT_FIELD: Record<OperationClass, string> = {
  read: 'IntegrityRead',
  write: 'IntegrityWrite',
  credentials: 'IntegrityCredentials',
  admin: 'IntegrityAdmin',
};

export function tenantDoc(ctx: Pick<ServiceContext, 'store' | 'state'>): Promise<Doc> {
  return tenantCacheOf(ctx).get();
}

export function requiredLevel(tenant: Doc, cls: OperationClass): number {
  const v = tenant[TENANT_FIELD[cls]];
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 4 ? v : CLASS_DEFAULTS[cls];
}

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
export const isSafeMethod = (method: string) => SAFE.has(method.toUpperCase());

/**
 * The class of a request made with a session. Enrollment is 'credentials'; an administrator's
 * requests are 'admin' except reading their own profile and sessions; others read or write.
 */
export function classify(req: FastifyRequest, isAdmin: boolean): OperationClass {
  const path = (req.url.split('?')[0] ?? '').replace(/\/+$/, '');
  if (path.startsWith('/auth/enroll')) return isAdmin && /[?&]user=/.test(req.url) ? 'admin' : 'credentials';
  const safe = isSafeMethod(req.method);
  if (safe && (path === '/users/me' || path === '/auth/sessions')) return 'read';
  if (isAdmin) return 'admin';
  return safe ? 'read' : 'write';
}

/**
 * The location policy (Tenant.LocationLevel, Tenant.LocationRegions; docs/signin.md): the highest
 * level a session may hold given its reported location. Levels from LocationLevel up need a
 * location reported in this session (POST /auth/location) inside one of the regions; without one
 * the session holds at most LocationLevel - 1. A reported location is the client's claim, so the
 * policy only ever lowers a level, never raises one. 4 (no cap) when the policy is off.
 */
export function locationCap(
  tenant: Doc,
  location: { Latitude: number; Longitude: number } | undefined,
): number {
  const level = tenant.LocationLevel;
  const regions = Array.isArray(tenant.LocationRegions) ? (tenant.LocationRegions as string[]) : [];
  if (typeof level !== 'number' || level < Level.OneFactor || level > Level.Hardware) return Level.Hardware;
  if (location && insideRegions(location.Latitude, location.Longitude, regions)) return Level.Hardware;
  return level - 1;
}
