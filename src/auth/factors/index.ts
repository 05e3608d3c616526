import { type ServiceContext, ServiceState, stateOf } from '../../store/service.js';
import { FACTOR_KINDS, type FactorKind } from '../integrity.js';
import { activationFactor } from './activation/index.js';
import { backupFactor } from './backup/index.js';
import { boostFactor } from './boost/index.js';
import { emailFactor } from './email/index.js';
import type { Factor } from './factor.js';
import { locationFactor } from './location/index.js';
import { mobileFactor } from './mobile/index.js';
import { oauth2rpFactor } from './oauth2rp/index.js';
import { otpFactor } from './otp/index.js';
import { passwordFactor } from './password/index.js';
import { pinFactor } from './pin/index.js';
import { pstnFactor } from './pstn/index.js';
import { FACTOR_LIST, registerFactors } from './stepup.js';
import { totpFactor } from './totp/index.js';
import { u2fFactors } from './u2f/index.js';
import { vouchFactor } from './vouch/index.js';

/** Every sign-in factor and step, as plug-ins. Adding one = a folder here + one line in this list. */
export const factors: Factor[] = [
  emailFactor,
  passwordFactor,
  pinFactor,
  totpFactor,
  backupFactor,
  activationFactor,
  locationFactor,
  boostFactor,
  vouchFactor,
  otpFactor,
  pstnFactor,
  mobileFactor,
  ...u2fFactors,
  oauth2rpFactor,
];

// The lists that lower modules read, filled once from the declarations above (those modules are
// imported by the factors, so they cannot import this list).
registerFactors(factors);
for (const f of factors) knowKind(f.name, f.kind);

/**
 * A factor's kind is part of its code, known process-wide (a session records names; its level is
 * computed from their kinds): one name means one kind in every service of the process.
 */
function knowKind(name: string, kind: FactorKind | undefined): void {
  if (!kind) return;
  const known = FACTOR_KINDS[name];
  if (known !== undefined && known !== kind)
    throw new Error(`sign-in factor ${name} is of kind ${known} already; it cannot be ${kind} too`);
  FACTOR_KINDS[name] = kind;
}

/** This service's sign-in factors (the list above unless the service was given its own). */
export const factorsOf = (ctx: ServiceContext): readonly Factor[] =>
  // Only this module and useFactors put lists there, and both put Factor lists.
  stateOf(ctx, FACTOR_LIST) as readonly Factor[];

/**
 * Gives a service its own list of factors, before it serves anything (the composition root:
 * src/api/server.ts, ServerOptions.factors). Names must be unique.
 */
export function useFactors(ctx: ServiceContext, list: readonly Factor[]): void {
  const names = new Set<string>();
  for (const f of list) {
    if (names.has(f.name)) throw new Error(`two sign-in factors are named ${f.name}`);
    names.add(f.name);
    knowKind(f.name, f.kind);
  }
  ctx.state ??= new ServiceState();
  ctx.state.set(FACTOR_LIST, list);
}
