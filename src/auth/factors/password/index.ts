import { knowledgeFactor } from '../knowledge.js';

/** What is wrong with a new password under the tenant's rule (Tenant.PasswordMinLength), if anything. */
export function passwordProblem(v: string, tenant: Record<string, unknown>): string | undefined {
  const min = typeof tenant.PasswordMinLength === 'number' ? tenant.PasswordMinLength : 12;
  if ([...v].length < min) return `must have at least ${min} characters`;
  if (v.length > 1024) return 'must have at most 1024 characters';
  return undefined;
}

/** POST /auth/password (form intent, password); PUT/DELETE /auth/enroll/password {"Password"}. */
export const passwordFactor = knowledgeFactor({
  name: 'password',
  tag: 'Sign-in: password',
  formField: 'password',
  jsonField: 'Password',
  hashKey: 'PasswordHash',
  flag: 'HavePassword',
  what: 'password',
  check: passwordProblem,
  words: { label: 'password', proof: 'your password' },
  field: { label: 'Password', input: 'secret', autocomplete: 'current-password' },
  form: { rank: 20, submit: 'Sign in with password' },
  settings: {
    title: 'Password',
    rank: 10,
    secret: {
      field: 'Password',
      label: 'New password',
      input: 'secret',
      repeat: 'Repeat the new password',
      submit: 'Save password',
      change: 'Change password',
      saved: 'Password saved.',
    },
  },
});
