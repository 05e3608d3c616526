import { knowledgeFactor } from '../knowledge.js';

/** POST /auth/password (form intent, password); PUT/DELETE /auth/enroll/password {"Password"}. */
export const passwordFactor = knowledgeFactor({
  name: 'password',
  formField: 'password',
  jsonField: 'Password',
  hashKey: 'PasswordHash',
  flag: 'HavePassword',
  what: 'password',
  check(v, tenant) {
    const min = typeof tenant.PasswordMinLength === 'number' ? tenant.PasswordMinLength : 12;
    if ([...v].length < min) return `must have at least ${min} characters`;
    if (v.length > 1024) return 'must have at most 1024 characters';
    return undefined;
  },
});
