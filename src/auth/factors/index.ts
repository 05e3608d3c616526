import { FACTOR_KINDS } from '../integrity.js';
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
import { registerFactors } from './stepup.js';
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
for (const f of factors) if (f.kind) FACTOR_KINDS[f.name] = f.kind;
