import { ApiError } from '../core/errors.js';
import { DEFAULT_KEY_SCOPES } from '../objects/apikey.js';
import { objectTypes } from '../objects/registry.js';
import type { Doc } from '../schema/fields.js';
import type { Access, FieldRule, Grants, Op, Scope } from '../schema/type.js';
import type { Principal } from './principal.js';

/**
 * Which scope may do what, type by type, gathered from each type's `grants` (src/objects/*.ts).
 * Anything not granted is refused with 403. docs/api.md carries this matrix as a table, and
 * test/api/permissions.test.ts checks every cell of that table against the running API.
 */
export const MATRIX: Record<Exclude<Scope, 'admin'>, Record<string, Grants>> = {
  user: grantsOf('user'),
  audit: grantsOf('audit'),
  sync: grantsOf('sync'),
};

function grantsOf(scope: Exclude<Scope, 'admin'>): Record<string, Grants> {
  return Object.fromEntries(
    objectTypes.flatMap((t) => (t.grants?.[scope] ? [[t.kind, t.grants[scope]] as const] : [])),
  );
}

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

/**
 * Privilege-bearing fields, gathered from each type's `fieldRules` (the rules themselves are
 * explained at FieldRule in src/schema/type.ts): the matrix says who may write a type, this table
 * says who may set or change the fields of it that grant access. Checked on the normalized body
 * (after unknown or misspelt fields were refused), so only the declared spelling can ever be stored.
 * docs/api.md carries this as the field-rules table; test/api/permissions.test.ts checks it.
 */
export const FIELD_RULES: Record<string, Record<string, FieldRule>> = Object.fromEntries(
  objectTypes.flatMap((t) => (t.fieldRules ? [[t.kind, t.fieldRules] as const] : [])),
);

/** What a privilege rule may look up besides the object itself. */
export interface PrivilegeLookup {
  /** The API keys whose UserID is this user. */
  keysOf(userId: string): Promise<Doc[]>;
}

const scopesOf = (key: Doc): Scope[] => (Array.isArray(key.Scopes) ? (key.Scopes as Scope[]) : []);

/**
 * The scopes an object stands for: to change or delete it the caller must hold them all, so a
 * sync key cannot take over an administrator (by changing the e-mail address and recovering the
 * account, or by disabling them) and a user cannot revoke a key more powerful than its own access.
 * A user stands for the scopes of its API keys too (disabling or deleting the user revokes them),
 * except `user`, which every user has anyway.
 * docs/api.md carries this as the privileged-objects table.
 */
export const PRIVILEGE_OF: Record<string, (doc: Doc, lookup: PrivilegeLookup) => Promise<readonly Scope[]>> =
  {
    User: async (doc, lookup) => {
      const held = new Set<Scope>(doc.Admin === true ? ['admin'] : []);
      for (const key of await lookup.keysOf(String(doc.ID))) for (const s of scopesOf(key)) held.add(s);
      held.delete('user');
      return [...held];
    },
    APIKey: async (doc) => scopesOf(doc),
  };

/** Does the principal hold every one of these scopes (admin holds all)? */
export function holdsAll(p: Principal, scopes: readonly Scope[]): boolean {
  return p.scopes.has('admin') || scopes.every((s) => p.scopes.has(s));
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Checks the field rules of a write: `doc` is the normalized body, `previous` the stored object
 * (undefined on create, when the defaults stand in for it). Throws 403 naming the field.
 */
export function checkFieldRules(
  p: Principal,
  kind: string,
  doc: Doc,
  previous: Doc | undefined,
  defaults: Doc,
): void {
  const rules = FIELD_RULES[kind];
  if (!rules || p.scopes.has('admin')) return;
  for (const [name, rule] of Object.entries(rules)) {
    const value = doc[name];
    const before = previous ? previous[name] : defaults[name];
    const changed = !same(value, before);
    if (rule === 'admin' && changed) {
      throw new ApiError('Forbidden', `only administrators may set ${kind}.${name}`, { field: name });
    }
    if (rule === 'scopes held' && (changed || !previous)) {
      const list = Array.isArray(value) && value.length > 0 ? (value as Scope[]) : DEFAULT_KEY_SCOPES;
      const missing = list.filter((s) => !p.scopes.has(s));
      if (missing.length > 0)
        throw new ApiError(
          'Forbidden',
          `${kind}.${name} may list only scopes your credentials hold; not ${missing.join(', ')}`,
          { field: name },
        );
    }
    if (rule === 'own user' && (changed || !previous)) {
      const effective = value === '' && !previous ? p.userId : value;
      if (p.userId === '' || effective !== p.userId)
        throw new ApiError('Forbidden', `${kind}.${name} may name only your own user`, { field: name });
    }
  }
}

/** Refuses (403) a change or deletion of an object that stands for scopes the caller lacks. */
export async function checkPrivilegedObject(
  p: Principal,
  kind: string,
  id: string,
  doc: Doc,
  op: Op,
  lookup: PrivilegeLookup,
): Promise<void> {
  const rule = PRIVILEGE_OF[kind];
  if (!rule || p.scopes.has('admin')) return;
  const scopes = await rule(doc, lookup);
  if (holdsAll(p, scopes)) return;
  throw new ApiError(
    'Forbidden',
    `${kind} ${id} holds privileges your credentials lack (${scopes.join(', ')}); only a caller holding them may ${op} it`,
  );
}
