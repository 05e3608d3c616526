import fc from 'fast-check';
import type { FastifyError } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBodySchema } from '../../src/api/objectschemas.js';
import { requestValidators, schemaRefusal } from '../../src/api/validation.js';
import { ApiError } from '../../src/core/errors.js';
import { objectTypes } from '../../src/objects/registry.js';
import type { Field, FieldMap } from '../../src/schema/fields.js';
import { normalize } from '../../src/schema/fields.js';
import { bodyFields } from '../../src/schema/type.js';
import { backends, startTestService, type TestService } from '../helpers.js';

/*
 * The object writes (create, PUT, merge patch of every type) are validated by route schemas
 * derived from the type's fields (src/api/objectschemas.ts writeBodySchema). The write path's
 * normalize still reads every body, from every writer. Two properties tie them together:
 * - differential: for bodies with one field set to an arbitrary JSON value, the schema never
 *   refuses what normalize takes, and what it refuses normalize refuses too, with the same
 *   X-Error-Code and the same field;
 * - order: the refusal is answered where the spec puts the body check, after 403 (the type is
 *   not the caller's to write), 404 (no such object) and 428 (no If-Match).
 */

/** Dotted paths of every field, nested ones included, with their declarations. */
function paths(fields: FieldMap, prefix = ''): [string, Field][] {
  return Object.entries(fields).flatMap(([name, f]) => {
    const p = prefix ? `${prefix}.${name}` : name;
    return f.kind === 'object' && !f.readOnly ? [[p, f] as [string, Field], ...paths(f.fields, p)] : [[p, f]];
  });
}

const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.oneof(fc.string({ maxLength: 4 }), fc.integer()), { maxLength: 3 }),
  fc.dictionary(fc.stringMatching(/^[A-Za-z]{1,6}$/), fc.string({ maxLength: 4 }), { maxKeys: 2 }),
);

/** Values near this field's limits: its enum and not, lengths and counts at and past the bound. */
function edgesOf(f: Field): fc.Arbitrary<unknown> {
  const edges: fc.Arbitrary<unknown>[] = [anyJson];
  const text = (n: number) => fc.constantFrom('x'.repeat(n), 'x'.repeat(n + 1));
  if (f.kind === 'strings') {
    if (f.enum) edges.push(fc.array(fc.constantFrom(...f.enum, 'not-a-member'), { maxLength: 3 }));
    if (f.maxLength !== undefined) edges.push(text(f.maxLength).map((s) => [s]));
    if (f.maxItems !== undefined)
      edges.push(
        fc.constantFrom(f.maxItems, f.maxItems + 1).map((n) => Array.from({ length: n }, (_, i) => `v${i}`)),
      );
  } else if (f.kind !== 'object') {
    if (f.enum) edges.push(fc.constantFrom(...f.enum, 'not-a-member'));
    if (f.maxLength !== undefined) edges.push(text(f.maxLength));
    if (f.min !== undefined) edges.push(fc.constantFrom(f.min, f.min - 1, f.min + 0.5));
    if (f.max !== undefined) edges.push(fc.constantFrom(f.max, f.max + 1));
    if (f.kind === 'timestamp') edges.push(fc.constantFrom('2026-01-02T03:04:05Z', 'yesterday'));
  }
  return fc.oneof(...edges);
}

/** `{}` with the field at `path` (a.b.c) set to `value`, or an unknown field at that level. */
function bodyWith(path: string, value: unknown): Record<string, unknown> {
  const parts = path.split('.');
  const body: Record<string, unknown> = {};
  let at = body;
  for (const p of parts.slice(0, -1)) {
    at[p] = {};
    at = at[p] as Record<string, unknown>;
  }
  at[parts.at(-1) as string] = value;
  return body;
}

/** What a check answered: accepted, or refused with this code and field. */
type Verdict = 'accepted' | { code: string; field: string | undefined };

function normalizeVerdict(fields: FieldMap, body: unknown): Verdict {
  try {
    normalize(fields, body, undefined);
    return 'accepted';
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    return { code: e.code, field: e.field };
  }
}

function schemaVerdict(validate: ReturnType<ReturnType<typeof requestValidators>>, body: unknown): Verdict {
  if (validate(body)) return 'accepted';
  const err = Object.assign(new Error('invalid'), {
    validation: validate.errors,
    validationContext: 'body',
  }) as unknown as FastifyError;
  const e = schemaRefusal(err);
  return { code: e.code, field: e.field };
}

const WRITTEN = objectTypes.filter((t) => t.ops.includes('create') || t.ops.includes('update'));

describe('object write schemas agree with the write path (differential)', () => {
  const compile = requestValidators(true);
  for (const type of WRITTEN) {
    const fields = bodyFields(type);
    it(`${type.kind}: one field of any value; an unknown field`, () => {
      const validate = compile({ schema: writeBodySchema(fields), httpPart: 'body' });
      const all = paths(fields);
      const oneField = fc.oneof(
        ...all.map(([p, f]) => edgesOf(f).map((v) => bodyWith(p, v))),
        ...all
          .filter(([, f]) => f.kind === 'object' && !f.readOnly)
          .map(([p]) => fc.stringMatching(/^[a-z][A-Za-z]{0,7}$/).map((k) => bodyWith(`${p}.${k}`, 1))),
        fc.stringMatching(/^[a-z][A-Za-z]{0,7}$/).map((k) => ({ [k]: 1 })),
        anyJson.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v)),
      );
      fc.assert(
        fc.property(oneField, (body) => {
          const byNormalize = normalizeVerdict(fields, body);
          const bySchema = schemaVerdict(validate, body);
          if (byNormalize === 'accepted') expect(bySchema, JSON.stringify(body)).toBe('accepted');
          if (bySchema === 'accepted') return;
          // Refused by both, with the same code, naming the same field. The list item may differ:
          // normalize checks each item whole in order (a bad e-mail address at [0] before a number
          // at [1]), the schema only the shape the finer checks leave to normalize.
          expect(byNormalize, JSON.stringify(body)).not.toBe('accepted');
          const item = /\[\d+\]$/;
          const named = (v: Verdict) =>
            v === 'accepted' ? v : { ...v, field: v.field?.replace(item, '[i]') };
          expect(named(byNormalize), JSON.stringify(body)).toEqual(named(bySchema));
        }),
        { numRuns: Number(process.env.RUNS ?? 300) },
      );
    });
  }
});

describe.each(backends())('object writes validated by their schemas, on %s', (backend) => {
  let s: TestService;
  let userKey: string;
  let userId: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    const made = await s.req({ method: 'POST', url: '/users', payload: { Email: 'plain@example.com' } });
    userId = made.headers['x-id'] as string;
    userKey = await s.keyFor(['user'], userId);
  });
  afterAll(async () => s?.close());

  const json = { 'content-type': 'application/json' };
  const refused = (
    res: { statusCode: number; headers: Record<string, unknown>; body: string },
    code: string,
  ) => {
    expect(res.statusCode, res.body).toBe(400);
    expect(res.headers['x-error-code'], res.body).toBe(code);
  };

  it('every object route with a body validates by its schema', () => {
    const paths = new Set(objectTypes.map((t) => `/${t.path}`));
    const writes = s.app.apiRoutes.filter(
      (r) =>
        ['POST', 'PUT', 'PATCH'].includes(r.method) &&
        paths.has(r.url.replace(/\/:id$/, '')) &&
        r.schema?.body !== undefined,
    );
    expect(writes.length).toBeGreaterThan(10);
    for (const r of writes) expect(r.schema?.validatedBy, `${r.method} ${r.url}`).toBe('schema');
  });

  it('a wrong type, an unknown field, a nested one: 400 naming the field', async () => {
    let res = await s.req({ method: 'POST', url: '/users', payload: '{"Email":5}', headers: json });
    refused(res, 'Invalid Field');
    expect(res.json().Field).toBe('Email');
    res = await s.req({ method: 'POST', url: '/users', payload: '{"Nope":1}', headers: json });
    refused(res, 'Unknown Field');
    expect(res.json().Field).toBe('Nope');
    res = await s.req({ method: 'POST', url: '/users', payload: '{"Name":{"FullName":[]}}', headers: json });
    refused(res, 'Invalid Field');
    expect(res.json().Field).toBe('Name.FullName');
    res = await s.req({ method: 'POST', url: '/users', payload: '[1]', headers: json });
    refused(res, 'Invalid JSON');
  });

  it('null stands for the default, read-only fields are ignored, no body is {}', async () => {
    const got = await s.req({ method: 'GET', url: `/users/${userId}` });
    const back = await s.req({
      method: 'PUT',
      url: `/users/${userId}`,
      payload: { ...(got.json() as Record<string, unknown>), Name: null },
      headers: { 'if-match': got.headers.etag as string },
    });
    expect(back.statusCode, back.body).toBeLessThan(400);
    const none = await s.req({ method: 'POST', url: '/groups' });
    expect(none.statusCode, none.body).toBe(201);
  });

  it('the spec’s order: 403, then 404, then 428, then the body', async () => {
    const bad = '{"Email":5}';
    // A key that may not create users: refused for that, whatever the body says.
    let res = await s.req({
      method: 'POST',
      url: '/users',
      payload: bad,
      headers: { ...json, authorization: `Bearer ${userKey}` },
    });
    expect(res.statusCode, res.body).toBe(403);
    res = await s.req({
      method: 'PUT',
      url: '/users/nosuchuser',
      payload: bad,
      headers: { ...json, 'if-match': '"x"' },
    });
    expect(res.statusCode, res.body).toBe(404);
    res = await s.req({ method: 'PUT', url: `/users/${userId}`, payload: bad, headers: json });
    expect(res.statusCode, res.body).toBe(428);
    res = await s.req({
      method: 'PATCH',
      url: `/users/${userId}`,
      payload: bad,
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(res.statusCode, res.body).toBe(428);
    res = await s.req({ method: 'DELETE', url: `/users/${userId}` });
    expect(res.statusCode, res.body).toBe(428);
    const etag = (await s.req({ method: 'GET', url: `/users/${userId}` })).headers.etag as string;
    res = await s.req({
      method: 'PATCH',
      url: `/users/${userId}`,
      payload: bad,
      headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag },
    });
    refused(res, 'Invalid Field');
    expect(res.json().Field).toBe('Email');
  });

  it('POST /scripts/test: 403 for a key that may not, then the schema', async () => {
    const bad = '{"Tests":5}';
    let res = await s.req({
      method: 'POST',
      url: '/scripts/test',
      payload: bad,
      headers: { ...json, authorization: `Bearer ${userKey}` },
    });
    expect(res.statusCode, res.body).toBe(403);
    res = await s.req({ method: 'POST', url: '/scripts/test', payload: bad, headers: json });
    refused(res, 'Invalid Field');
    expect(res.json().Field).toBe('Tests');
  });

  it('/openapi.json describes the body as validated: closed, null allowed', async () => {
    const doc = (await s.req({ method: 'GET', url: '/openapi.json' })).json();
    const body = doc.paths['/users'].post.requestBody.content['application/json'].schema;
    expect(body.additionalProperties).toBe(false);
    expect(body.properties.Email.type).toEqual(['string', 'null']);
    expect(body.properties.ID?.readOnly ?? true).toBe(true);
  });
});
