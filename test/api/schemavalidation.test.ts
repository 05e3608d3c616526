import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectTypes } from '../../src/objects/registry.js';
import { world } from '../directory/fixture.js';
import { backends, startTestService, type TestService } from '../helpers.js';

/*
 * Routes whose schemas validate (RouteSchema.validatedBy 'schema') refuse a bad request with the
 * answer the handler's own check gives: 400, X-Error-Code Invalid Field (Unknown Field for a
 * field the route does not have, Invalid JSON for a body that is not an object) and the field in
 * Field. Property-based: for every such route, a good body with one field made bad. The same
 * expectations held when the handlers checked (the routes were validatedBy 'handler').
 */

type World = Awaited<ReturnType<typeof world>>;
type Body = Record<string, unknown>;

interface Route {
  key: string;
  url: (w: World) => string;
  /** The proxy token (back channel, agents), or the admin key when absent. */
  token?: boolean;
  good: Body;
  /** Fields and values that are wrong for them. */
  bad: [string, fc.Arbitrary<unknown>][];
  /** Unknown fields are refused (additionalProperties: false); else they are ignored. */
  closed: boolean;
}

const nonInteger = fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Number.isInteger(n));
type Kind = 'string' | 'integer' | 'number' | 'boolean' | 'array' | 'object' | 'null';
const VALUES: Record<Kind, fc.Arbitrary<unknown>> = {
  string: fc.string(),
  integer: fc.integer(),
  number: nonInteger,
  boolean: fc.boolean(),
  array: fc.array(fc.string(), { maxLength: 3 }),
  object: fc.dictionary(fc.stringMatching(/^[a-z]{1,5}$/), fc.string()),
  null: fc.constant(null),
};
/** A JSON value of none of these kinds. */
const notA = (...kinds: Kind[]) =>
  fc.oneof(...(Object.keys(VALUES) as Kind[]).filter((k) => !kinds.includes(k)).map((k) => VALUES[k]));
/** A value that is not a string (nor null, when null is allowed). */
const notString = (nullOk: boolean) => notA('string', ...(nullOk ? (['null'] as const) : []));
const longText = (max: number) => fc.integer({ min: max + 1, max: max + 50 }).map((n) => 'x'.repeat(n));
const notIntegerIn = (min: number, max: number) =>
  fc.oneof(notA('integer', 'null'), fc.integer({ max: min - 1 }), fc.integer({ min: max + 1 }));
const member = (op: string) => ({
  key: `POST /groups/:id/members/:user${op ? `/${op}` : ''}`,
  url: (w: World) => `/groups/${w.groupId}/members/${w.userId}${op ? `/${op}` : ''}`,
  good: { Reason: 'because' },
  bad: [['Reason', fc.oneof(notString(true), longText(1024))]] as Route['bad'],
  closed: true,
});
const proxy = (path: string, fields: string[]): Route => ({
  key: `POST /proxy/v1/${path}`,
  url: () => `/proxy/v1/${path}`,
  token: true,
  good: Object.fromEntries(fields.map((f) => [f, 'x'])),
  bad: fields.map((f) => [f, fc.oneof(notString(false), longText(4096))]),
  closed: false,
});

const ROUTES: Route[] = [
  ...['', 'activate', 'approve', 'reject', 'unreject', 'use'].map(member),
  { ...member(''), key: 'DELETE /groups/:id/members/:user' },
  {
    key: 'POST /accountchanges/claim',
    url: () => '/accountchanges/claim',
    token: true,
    good: { Name: 'agent', Version: '1', Max: 5, LeaseSeconds: 60 },
    bad: [
      ['Name', notString(true)],
      ['Version', notString(true)],
      ['Max', notIntegerIn(1, 100)],
      ['LeaseSeconds', notIntegerIn(10, 3600)],
    ],
    closed: true,
  },
  {
    key: 'POST /accountchanges/:id/result',
    url: () => '/accountchanges/nochange/result',
    token: true,
    good: { Lease: 'l', Result: 'applied', Error: '' },
    bad: [
      ['Lease', fc.oneof(notString(false), fc.constant(''))],
      [
        'Result',
        fc.oneof(
          notString(false),
          fc.string().filter((s) => s !== 'applied' && s !== 'failed'),
        ),
      ],
      ['Error', notString(true)],
    ],
    closed: true,
  },
  {
    key: 'POST /users/:id/accounts/suggest',
    url: (w) => `/users/${w.userId}/accounts/suggest`,
    good: { Plan: { Name: 'p', Reason: 'r' } },
    bad: [
      ['Plan', notA('object', 'null')],
      ['Plan.Name', notString(false)],
      ['Plan.Reason', notString(false)],
    ],
    closed: true,
  },
  {
    key: 'POST /users/:id/disable',
    url: (w) => `/users/${w.userId}/disable`,
    good: { Reason: 'left' },
    bad: [['Reason', notString(true)]],
    closed: true,
  },
  proxy('register', ['Name', 'Version', 'Address']),
  proxy('apikey', ['Key']),
  proxy('session/exchange', ['Code']),
  proxy('session/check', ['SessionID']),
];

/** `good` with the (possibly nested: Plan.Name) field set to `value`. */
function withField(good: Body, field: string, value: unknown): Body {
  const [head, sub] = field.split('.') as [string, string | undefined];
  if (sub === undefined) return { ...good, [head]: value };
  return { ...good, [head]: { ...(good[head] as Body), [sub]: value } };
}

/** A field name no route has, that JSON parsing and the URL checks let through. */
const unknownName = fc.stringMatching(/^[A-Za-z][A-Za-z0-9]{0,11}$/);

describe.each(backends())('schema validation refuses bad requests as the handlers did, on %s', (backend) => {
  let s: TestService;
  let w: World;
  beforeAll(async () => {
    s = await startTestService(backend);
    w = await world(s);
  });
  afterAll(async () => s?.close());

  const send = (r: Route, payload: string, type = 'application/json', token: string | undefined = w.token) =>
    s.req({
      method: r.key.split(' ')[0] as 'POST',
      url: r.url(w),
      payload,
      ...(r.token ? { key: '', headers: { 'content-type': type, authorization: `Bearer ${token}` } } : {}),
      ...(r.token ? {} : { headers: { 'content-type': type } }),
    });
  const refused = (res: Awaited<ReturnType<typeof send>>, code: string, field?: string) => {
    expect(res.statusCode, res.body).toBe(400);
    expect(res.headers['x-error-code'], res.body).toBe(code);
    if (field !== undefined) {
      expect(res.json().Field, res.body).toBe(field);
      expect(res.json().Message).toContain(field);
    }
  };

  it('every route that validates by its schema is one of these (add a new one here)', () => {
    // The object writes and POST /scripts/test have their own test (objectvalidation.test.ts).
    const objectPaths = new Set(objectTypes.map((t) => `/${t.path}`));
    const bySchema = s.app.apiRoutes
      .filter((r) => r.schema?.validatedBy === 'schema')
      .filter((r) => !objectPaths.has(r.url.replace(/\/:id$/, '')) && r.url !== '/scripts/test')
      .map((r) => `${r.method} ${r.url}`);
    expect(new Set(bySchema)).toEqual(new Set(ROUTES.map((r) => r.key)));
  });

  for (const r of ROUTES) {
    it(`${r.key}: a wrong value is Invalid Field naming the field`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(...r.bad.map(([field, arb]) => arb.map((value) => [field, value] as const))),
          async ([field, value]) => {
            refused(await send(r, JSON.stringify(withField(r.good, field, value))), 'Invalid Field', field);
          },
        ),
        { numRuns: 25 },
      );
    });

    it(`${r.key}: ${r.closed ? 'an unknown field is Unknown Field' : 'unknown fields are let through'}; a body not an object is Invalid JSON`, async () => {
      const known = new Set(Object.keys(r.good));
      await fc.assert(
        fc.asyncProperty(
          unknownName.filter((k) => !known.has(k)),
          // Not "" nor (back channel) an array: the two answers that changed, below.
          fc.oneof(
            ...(r.token && !r.closed ? [] : [fc.array(fc.integer())]),
            fc.integer(),
            fc.string({ minLength: 1 }),
            fc.boolean(),
          ),
          async (name, notObject) => {
            // Open: the unknown field is let through, so a bad one is what is refused.
            const [first] = r.bad[0] as [string, unknown];
            if (r.closed)
              refused(await send(r, JSON.stringify({ ...r.good, [name]: 1 })), 'Unknown Field', name);
            else
              refused(
                await send(r, JSON.stringify({ ...withField(r.good, first, 7), [name]: 1 })),
                'Invalid Field',
                first,
              );
            refused(await send(r, JSON.stringify(notObject)), 'Invalid JSON');
          },
        ),
        { numRuns: 10 },
      );
    });
  }

  it('a route checked with the proxy token answers 401 without a valid one, whatever the body', async () => {
    for (const r of ROUTES.filter((x) => x.token)) {
      const [field] = r.bad[0] as [string, unknown];
      for (const token of ['', 'gp.nope.nope', `gp.${w.appId}.wrong`]) {
        const res = await send(r, JSON.stringify(withField(r.good, field, 7)), 'application/json', token);
        expect(res.statusCode, `${r.key} ${token}`).toBe(401);
      }
    }
  });

  it('form bodies: a repeated or unknown field of a membership operation', async () => {
    const r = member('approve');
    const form = 'application/x-www-form-urlencoded';
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.stringMatching(/^[a-z]{0,8}$/), { minLength: 2, maxLength: 4 }),
        async (vs) => {
          const payload = vs.map((v) => `reason=${v}`).join('&');
          refused(await send(r, payload, form), 'Invalid Field', 'reason');
        },
      ),
      { numRuns: 10 },
    );
    refused(await send(r, `reason=${'x'.repeat(1025)}`, form), 'Invalid Field', 'reason');
    refused(await send(r, 'reason=a&Reason=b', form), 'Unknown Field', 'Reason');
  });

  it('changed on purpose: a JSON "" body, and an array to the back channel, are Invalid JSON', async () => {
    // The handlers took "" as no body, and body() let an array through as an object without fields.
    refused(await send(member('approve'), '""'), 'Invalid JSON');
    refused(
      await send(ROUTES.find((r) => r.key === 'POST /accountchanges/:id/result') as Route, '""'),
      'Invalid JSON',
    );
    for (const r of ROUTES.filter((x) => x.token && !x.closed)) refused(await send(r, '[]'), 'Invalid JSON');
  });

  it('good requests still pass the schema: null and absent optional fields, no body', async () => {
    const claim = ROUTES.find((r) => r.key === 'POST /accountchanges/claim') as Route;
    for (const payload of ['{}', 'null', '{"Max":null,"LeaseSeconds":null,"Name":null,"Version":null}']) {
      const res = await send(claim, payload);
      expect(res.statusCode, payload).toBe(200);
    }
    const disable = await s.req({
      method: 'POST',
      url: `/users/${w.userId}/disable`,
      payload: 'null',
      headers: { 'content-type': 'application/json' },
    });
    expect(disable.statusCode, disable.body).toBe(200);
    // No body at all: no reason (the membership operations, whose body is optional).
    const add = await s.req({ method: 'POST', url: `/groups/${w.groupId}/members/${s.adminId}` });
    expect(add.statusCode, add.body).toBeLessThan(300);
  });
});

/** Every route left to its handler says why, in a `// handler: ...` comment just above. */
describe('routes whose handlers validate say why', () => {
  const ROOT = fileURLToPath(new URL('../..', import.meta.url));
  const files = (dir: string): string[] =>
    readdirSync(dir).flatMap((n) => {
      const p = join(dir, n);
      return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
    });
  it('src/api, src/auth, src/groups, src/scripts, src/directory, src/oidc', () => {
    const unexplained: string[] = [];
    for (const dir of ['api', 'auth', 'groups', 'scripts', 'directory', 'oidc'])
      for (const f of files(join(ROOT, 'src', dir))) {
        const lines = readFileSync(f, 'utf8').split('\n');
        lines.forEach((line, i) => {
          if (!/validatedBy(: 'handler'|,)/.test(line)) return;
          // The comment block just above, of one or more lines, starts with "// handler: <why>".
          let j = i - 1;
          while (j > 0 && /^\s*\/\//.test(lines[j - 1] ?? '') && !/^\s*\/\/ handler:/.test(lines[j] ?? ''))
            j--;
          if (!/^\s*\/\/ handler: \S/.test(lines[j] ?? '')) unexplained.push(`${relative(ROOT, f)}:${i + 1}`);
        });
      }
    expect(unexplained).toEqual([]);
  });
});
