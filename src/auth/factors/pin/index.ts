import { knowledgeFactor } from '../knowledge.js';

/** POST /auth/pin (form intent, code); PUT/DELETE /auth/enroll/pin {"PIN"}. */
export const pinFactor = knowledgeFactor({
  name: 'pin',
  tag: 'Sign-in: PIN',
  formField: 'code',
  jsonField: 'PIN',
  hashKey: 'PINHash',
  flag: 'HavePIN',
  what: 'PIN',
  check: (v) => (/^[0-9]{4,12}$/.test(v) ? undefined : 'must be 4 to 12 digits'),
  words: { label: 'PIN', proof: 'your PIN' },
  field: { label: 'PIN', input: 'secret-digits', autocomplete: 'off' },
  form: { rank: 50, submit: 'Continue with PIN' },
  settings: {
    title: 'PIN',
    rank: 20,
    secret: {
      field: 'PIN',
      label: 'New PIN (4 to 12 digits)',
      input: 'secret-digits',
      pattern: '[0-9]{4,12}',
      submit: 'Save PIN',
      change: 'Change PIN',
      saved: 'PIN saved.',
    },
  },
});
