import { knowledgeFactor } from '../knowledge.js';

/** POST /auth/pin (form intent, code); PUT/DELETE /auth/enroll/pin {"PIN"}. */
export const pinFactor = knowledgeFactor({
  name: 'pin',
  formField: 'code',
  jsonField: 'PIN',
  hashKey: 'PINHash',
  flag: 'HavePIN',
  what: 'PIN',
  check: (v) => (/^[0-9]{4,12}$/.test(v) ? undefined : 'must be 4 to 12 digits'),
});
