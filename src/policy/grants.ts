import { ApiError } from '../core/errors.js';
import { DEFAULT_KEY_SCOPES } from '../objects/apikey.js';
import { objectTypes } from '../objects/registry.js';
import type { Doc } from '../schema/fields.js';
import type { Principal } from '../schema/principal.js';
import type { Access, FieldRule, Grants, Op, Scope } from '../schema/type.js';

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
      throw new ApiError('Forbidden', `only administrators may set ${kind}.${name}`, {
        field: name,
        rule: 'field.admin-only',
      });
    }
    if (rule === 'scopes held' && (changed || !previous)) {
      const list = Array.isArray(value) && value.length > 0 ? (value as Scope[]) : DEFAULT_KEY_SCOPES;
      const missing = list.filter((s) => !p.scopes.has(s));
      if (missing.length > 0)
        throw new ApiError(
          'Forbidden',
          `${kind}.${name} may list only scopes your credentials hold; not ${missing.join(', ')}`,
          { field: name, rule: 'field.scopes-held' },
        );
    }
    if (rule === 'own user' && (changed || !previous)) {
      const effective = value === '' && !previous ? p.userId : value;
      if (p.userId === '' || effective !== p.userId)
        throw new ApiError('Forbidden', `${kind}.${name} may name only your own user`, {
          field: name,
          rule: 'field.own-user',
        });
    }
  }
}
