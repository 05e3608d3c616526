import type { Scope } from '../objects/apikey.js';
import type { Op } from '../objects/type.js';
import type { Principal } from './principal.js';

/**
 * Which scope may do what, type by type. 'all': any object; 'own': only objects whose owner field
 * (ObjectType.ownerField) is the caller's user. Anything not listed is refused with 403.
 * docs/api.md carries this matrix as a table, and test/permissions.test.ts checks every cell of
 * that table against the running API.
 */
export type Access = 'all' | 'own';
type Grants = Partial<Record<Op, Access>>;

const READ: Grants = { list: 'all', get: 'all' };
const FULL: Grants = { list: 'all', get: 'all', create: 'all', update: 'all', delete: 'all' };

export const MATRIX: Record<Exclude<Scope, 'admin'>, Record<string, Grants>> = {
  // Normal user access: one's own user, own API keys and vouch requests, and the group directory.
  user: {
    User: { list: 'own', get: 'own' },
    APIKey: { list: 'own', get: 'own', delete: 'own' },
    VouchRequest: { list: 'own', get: 'own' },
    Group: READ,
    Membership: { list: 'own', get: 'own' },
  },
  // Read-only access to user and activity information.
  audit: {
    User: READ,
    Group: READ,
    Membership: READ,
    Account: READ,
    AccountChange: READ,
    APIKey: READ,
    App: READ,
    Metric: READ,
    RemoteAgent: READ,
    ScriptLog: READ,
    VouchRequest: READ,
    Tenant: { get: 'all' },
  },
  // Administrative changes to users and groups only.
  sync: {
    User: FULL,
    Group: FULL,
    // Memberships change only through /groups/:id/members/:user (docs/groups.md).
    Membership: READ,
  },
};

/** The widest access any of the principal's scopes grants, or undefined when none does. */
export function access(p: Principal, kind: string, op: Op): Access | undefined {
  if (p.scopes.has('admin')) return 'all';
  let best: Access | undefined;
  for (const scope of p.scopes) {
    if (scope === 'admin') continue;
    const a = MATRIX[scope][kind]?.[op];
    if (a === 'all') return 'all';
    if (a === 'own' && p.userId !== '') best = 'own';
  }
  return best;
}

/** Special endpoints that are not object CRUD name the scopes that may call them. */
export function hasAnyScope(p: Principal, scopes: readonly Scope[]): boolean {
  return p.scopes.has('admin') || scopes.some((s) => p.scopes.has(s));
}
