import { ApiError } from '../core/errors.js';
import { checkHttpUrl } from '../core/url.js';

/**
 * A small schema language for object fields. Each type declares its fields once; from that
 * declaration come validation (400 naming the field), defaults (zero values always serialized),
 * server-managed fields (ignored on write), and the set of fields lists may filter and order by.
 */
export type ScalarKind = 'string' | 'boolean' | 'integer' | 'number' | 'timestamp';

interface FieldBase {
  /** Server-managed: ignored on write, kept from the stored object (or the default on create). */
  readOnly?: boolean;
  /** Short human description, used by the docs. */
  doc?: string;
}

export interface ScalarField extends FieldBase {
  kind: ScalarKind;
  default: string | number | boolean;
  /** Extra check on a well-typed value; returns an error message or undefined. */
  check?: (value: never) => string | undefined;
  enum?: readonly string[];
  maxLength?: number;
  min?: number;
  max?: number;
  /** The value, when not empty, must be the ID of an existing object of this kind. */
  ref?: string;
}

export interface ArrayField extends FieldBase {
  kind: 'strings';
  default: string[];
  check?: (value: string) => string | undefined;
  enum?: readonly string[];
  maxItems?: number;
  maxLength?: number;
  /** Every item must be the ID of an existing object of this kind. */
  ref?: string;
}

export interface ObjectField extends FieldBase {
  kind: 'object';
  fields: FieldMap;
  /** Sub-fields whose zero value is left out, so an unset object serializes as {} (as the spec shows Name and Icon). */
  omitZero?: boolean;
}

export type Field = ScalarField | ArrayField | ObjectField;
export type FieldMap = Record<string, Field>;
export type Doc = Record<string, unknown>;

export const ZERO_TIME = '0001-01-01T00:00:00Z';

const opt = <T extends object>(o: T | undefined): T => o ?? ({} as T);

export const f = {
  string: (o?: Partial<Omit<ScalarField, 'kind'>>): ScalarField => ({
    kind: 'string',
    default: '',
    maxLength: 1024,
    ...opt(o),
  }),
  text: (o?: Partial<Omit<ScalarField, 'kind'>>): ScalarField => ({
    kind: 'string',
    default: '',
    maxLength: 65536,
    ...opt(o),
  }),
  boolean: (o?: Partial<Omit<ScalarField, 'kind'>>): ScalarField => ({
    kind: 'boolean',
    default: false,
    ...opt(o),
  }),
  integer: (o?: Partial<Omit<ScalarField, 'kind'>>): ScalarField => ({
    kind: 'integer',
    default: 0,
    ...opt(o),
  }),
  number: (o?: Partial<Omit<ScalarField, 'kind'>>): ScalarField => ({
    kind: 'number',
    default: 0,
    ...opt(o),
  }),
  timestamp: (o?: Partial<Omit<ScalarField, 'kind'>>): ScalarField => ({
    kind: 'timestamp',
    default: ZERO_TIME,
    ...opt(o),
  }),
  enum: (values: readonly string[], o?: Partial<Omit<ScalarField, 'kind'>>): ScalarField => ({
    kind: 'string',
    default: values[0] ?? '',
    enum: values,
    ...opt(o),
  }),
  strings: (o?: Partial<Omit<ArrayField, 'kind'>>): ArrayField => ({
    kind: 'strings',
    default: [],
    maxItems: 256,
    maxLength: 1024,
    ...opt(o),
  }),
  object: (fields: FieldMap, o?: Partial<Omit<ObjectField, 'kind' | 'fields'>>): ObjectField => ({
    kind: 'object',
    fields,
    ...opt(o),
  }),
};

// ---- reusable checks ------------------------------------------------------------------------

const EMAIL = /^[^\s@]+@[^\s@]+$/;
export const checkEmail = (v: string) =>
  v === '' || (EMAIL.test(v) && v.length <= 254) ? undefined : 'is not an e-mail address';
export const checkUnixName = (v: string) =>
  v === '' || /^[a-z_][a-z0-9_-]{0,31}$/.test(v)
    ? undefined
    : 'must be a Unix user name: a-z, 0-9, _ and -, 32 characters at most, not starting with a digit';
export const checkUrl = (v: string) => {
  if (v === '') return undefined;
  try {
    const u = new URL(v);
    return u.protocol === 'http:' || u.protocol === 'https:' ? undefined : 'must be an http or https URL';
  } catch {
    return 'is not a URL';
  }
};
/**
 * Where a proxy forwards to (VirtualHost.Upstream): empty, or what the proxy accepts for its own
 * proxy.upstream (checkHttpUrl: no user name or password, no spaces or control characters), so
 * the service refuses at once a value the proxy would ignore.
 */
export const checkUpstream = (v: string) => {
  const bad = checkUrl(v);
  if (bad || v === '') return bad;
  try {
    checkHttpUrl(v);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
};
export const checkOrigin = (v: string) => {
  const bad = checkUrl(v);
  if (bad) return bad;
  return v === '' || new URL(v).origin === v
    ? undefined
    : 'must be an origin such as https://app.example.com';
};
export const checkHostname = (v: string) =>
  /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(v)
    ? undefined
    : 'must be a lower-case DNS host name';

// ---- timestamps -----------------------------------------------------------------------------

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Normalizes an RFC 3339 timestamp to UTC with whole seconds ("2026-01-02T03:04:05Z"), so stored
 * values compare correctly as strings in filters and ordering on both backends.
 */
export function normalizeTimestamp(v: string): string | undefined {
  const m = RFC3339.exec(v);
  if (!m) return undefined;
  if (v.startsWith('0001-01-01T00:00:00') && /(Z|z|\+00:00)$/.test(v)) return ZERO_TIME;
  const ms = Date.parse(v.toUpperCase());
  if (Number.isNaN(ms)) return undefined;
  const d = new Date(Math.floor(ms / 1000) * 1000);
  if (d.getUTCFullYear() < 1 || d.getUTCFullYear() > 9999) return undefined;
  return `${d.toISOString().slice(0, 19)}Z`;
}

/**
 * Refuses (400) a client timestamp with non-zero fractional seconds anywhere in `input`: stored
 * timestamps have whole seconds (so they compare as strings), and silently dropping the fraction
 * would store a different instant than the one sent. ".000" is accepted. Server-written values
 * go through normalizeTimestamp, which truncates.
 */
export function refuseFractionalSeconds(fields: FieldMap, input: unknown, path = ''): void {
  if (!isPlainObject(input)) return;
  for (const [name, field] of Object.entries(fields)) {
    const value = input[name];
    const p = path ? `${path}.${name}` : name;
    if (field.kind === 'object') refuseFractionalSeconds(field.fields, value, p);
    else if (field.kind === 'timestamp' && !field.readOnly && typeof value === 'string') {
      const fraction = RFC3339.exec(value)?.[7];
      if (fraction && /[1-9]/.test(fraction))
        bad(
          p,
          `has fractional seconds (${fraction}); timestamps are kept to the whole second: send ${value.replace(fraction, '')}`,
        );
    }
  }
}

export function timestampMs(v: string): number {
  return v === ZERO_TIME ? Number.NEGATIVE_INFINITY : Date.parse(v);
}

// ---- normalization --------------------------------------------------------------------------

const isPlainObject = (v: unknown): v is Doc => v !== null && typeof v === 'object' && !Array.isArray(v);

const typeName = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function bad(path: string, message: string): never {
  throw new ApiError('InvalidField', `${path} ${message}`, { field: path });
}

function normalizeScalar(field: ScalarField, value: unknown, path: string): unknown {
  switch (field.kind) {
    case 'string': {
      if (typeof value !== 'string') bad(path, `must be a string, got ${typeName(value)}`);
      if (field.maxLength !== undefined && value.length > field.maxLength)
        bad(path, `is longer than ${field.maxLength} characters`);
      if (field.enum && !field.enum.includes(value))
        bad(path, `must be one of ${field.enum.map((e) => JSON.stringify(e)).join(', ')}`);
      return value;
    }
    case 'boolean':
      if (typeof value !== 'boolean') bad(path, `must be true or false, got ${typeName(value)}`);
      return value;
    case 'integer':
    case 'number': {
      if (typeof value !== 'number' || !Number.isFinite(value))
        bad(path, `must be a number, got ${typeName(value)}`);
      if (field.kind === 'integer' && !Number.isSafeInteger(value)) bad(path, 'must be a whole number');
      if (field.min !== undefined && value < field.min) bad(path, `must be at least ${field.min}`);
      if (field.max !== undefined && value > field.max) bad(path, `must be at most ${field.max}`);
      return value;
    }
    case 'timestamp': {
      if (typeof value !== 'string')
        bad(path, `must be an RFC 3339 timestamp string, got ${typeName(value)}`);
      const ts = normalizeTimestamp(value);
      if (ts === undefined) bad(path, 'must be an RFC 3339 timestamp such as 2026-01-02T03:04:05Z');
      return ts;
    }
  }
}

function isZero(field: Field, v: unknown): boolean {
  if (field.kind === 'object') return isPlainObject(v) && Object.keys(v).length === 0;
  if (field.kind === 'strings') return Array.isArray(v) && v.length === 0;
  return v === field.default;
}

/**
 * Builds the stored form of an object from a client body: fields in declaration order, defaults
 * filled in, read-only fields taken from `previous`. Unknown fields and wrong types are rejected.
 */
export function normalize(fields: FieldMap, input: unknown, previous: Doc | undefined, path = ''): Doc {
  if (!isPlainObject(input)) {
    if (path === '') throw new ApiError('InvalidJSON', 'the body must be a JSON object');
    bad(path, `must be an object, got ${typeName(input)}`);
  }
  for (const key of Object.keys(input)) {
    if (!Object.hasOwn(fields, key)) {
      const name = path ? `${path}.${key}` : key;
      throw new ApiError('UnknownField', `${name} is not a field of this object`, { field: name });
    }
  }
  const out: Doc = {};
  for (const [name, field] of Object.entries(fields)) {
    const p = path ? `${path}.${name}` : name;
    const prev = previous?.[name];
    if (field.readOnly) {
      out[name] = prev !== undefined ? prev : defaultOf(field);
      continue;
    }
    const raw = input[name];
    let value: unknown;
    if (raw === undefined || raw === null) {
      value = defaultOf(field);
    } else if (field.kind === 'object') {
      value = normalize(field.fields, raw, isPlainObject(prev) ? prev : undefined, p);
      if (field.omitZero) {
        for (const [sub, subField] of Object.entries(field.fields)) {
          if (isZero(subField, (value as Doc)[sub])) delete (value as Doc)[sub];
        }
      }
    } else if (field.kind === 'strings') {
      if (!Array.isArray(raw)) bad(p, `must be an array of strings, got ${typeName(raw)}`);
      if (field.maxItems !== undefined && raw.length > field.maxItems)
        bad(p, `has more than ${field.maxItems} items`);
      raw.forEach((item, i) => {
        if (typeof item !== 'string') bad(`${p}[${i}]`, `must be a string, got ${typeName(item)}`);
        if (field.maxLength !== undefined && item.length > field.maxLength)
          bad(`${p}[${i}]`, `is longer than ${field.maxLength} characters`);
        if (field.enum && !field.enum.includes(item))
          bad(`${p}[${i}]`, `must be one of ${field.enum.join(', ')}`);
        const msg = field.check?.(item);
        if (msg) bad(`${p}[${i}]`, msg);
      });
      value = [...new Set(raw as string[])];
    } else {
      value = normalizeScalar(field, raw, p);
      const msg = field.check?.(value as never);
      if (msg) bad(p, msg);
    }
    out[name] = value;
  }
  return out;
}

export function defaultOf(field: Field): unknown {
  if (field.kind === 'object') {
    if (field.omitZero) return {};
    const o: Doc = {};
    for (const [k, sub] of Object.entries(field.fields)) o[k] = defaultOf(sub);
    return o;
  }
  if (field.kind === 'strings') return [];
  return field.default;
}

/** Finds the scalar field at a dotted path ("Name.FullName"), for filters and ordering. */
export function scalarAt(fields: FieldMap, path: string): ScalarField | undefined {
  const parts = path.split('.');
  let map: FieldMap = fields;
  for (let i = 0; i < parts.length; i++) {
    const field = map[parts[i] as string];
    if (!field || !Object.hasOwn(map, parts[i] as string)) return undefined;
    if (i === parts.length - 1)
      return field.kind === 'object' || field.kind === 'strings' ? undefined : field;
    if (field.kind !== 'object') return undefined;
    map = field.fields;
  }
  return undefined;
}
