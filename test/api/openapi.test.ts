import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectTypes } from '../../src/objects/registry.js';
import { startTestService, type TestService } from '../helpers.js';

describe('GET /openapi.json', () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService('sqlite');
  });
  afterAll(async () => s?.close());

  it('describes every type, its fields and exactly its operations, without credentials', async () => {
    const res = await s.req({ method: 'GET', url: '/openapi.json', key: '' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe('3.1.0');
    for (const type of objectTypes) {
      expect(Object.keys(doc.components.schemas[type.kind].properties)).toEqual(Object.keys(type.fields));
      const base = `/${type.path}`;
      const methods = (path: string) => Object.keys(doc.paths[path] ?? {}).filter((k) => k !== 'parameters');
      const expected = new Set<string>();
      if (type.identity === 'singleton') {
        if (type.ops.includes('get')) expected.add(`${base} get`);
        if (type.ops.includes('update')) expected.add(`${base} put`).add(`${base} patch`);
      } else {
        if (type.ops.includes('list')) expected.add(`${base} get`);
        if (type.ops.includes('create'))
          expected.add(type.identity === 'named' ? `${base}/{id} post` : `${base} post`);
        if (type.ops.includes('get')) expected.add(`${base}/{id} get`);
        if (type.ops.includes('update')) expected.add(`${base}/{id} put`).add(`${base}/{id} patch`);
        if (type.ops.includes('delete')) expected.add(`${base}/{id} delete`);
      }
      const listed = new Set([
        ...methods(base).map((m) => `${base} ${m}`),
        ...methods(`${base}/{id}`).map((m) => `${base}/{id} ${m}`),
      ]);
      expect(listed, type.kind).toEqual(expected);
    }
    expect(doc.components.schemas.User.properties.HavePIN.readOnly).toBe(true);
    expect(doc.components.schemas.User.properties.SuspendAfter).toMatchObject({
      type: 'string',
      format: 'date-time',
    });
  });
});

/**
 * Routes that are not part of the API document, each with why: the pages and their assets
 * (src/web, HTML for browsers), and the OpenID Connect provider, whose protocol endpoints are
 * described by its discovery document and whose interaction pages are pages.
 */
const NOT_API: { route: RegExp; why: string }[] = [
  { route: /^GET \/$/, why: 'the home page' },
  { route: /^GET \/favicon\.(svg|ico)$/, why: 'an asset' },
  { route: /^(GET|POST) \/signin(\/|$)/, why: 'the sign-in pages and their assets (src/web)' },
  { route: /^GET \/console(\/|$)/, why: 'the admin console page and its assets' },
  {
    route: /^[A-Z]+ \/oidc(\/\*)?$/,
    why: 'the OpenID Connect protocol (/oidc/.well-known/openid-configuration)',
  },
  { route: /^(GET|POST) \/oidc\/interaction\//, why: 'the OpenID Connect interaction pages and their forms' },
];

describe('the OpenAPI document is generated from the registered routes', () => {
  let s: TestService;
  let doc: {
    paths: Record<string, Record<string, { parameters?: { name: string; in: string }[]; responses: object }>>;
    components: { schemas: Record<string, unknown> };
  };
  beforeAll(async () => {
    s = await startTestService('sqlite');
    doc = (await s.req({ method: 'GET', url: '/openapi.json', key: '' })).json();
  });
  afterAll(async () => s?.close());

  const routes = () => {
    const all = s.app.apiRoutes.map((r) => ({ ...r, key: `${r.method} ${r.url}` }));
    // Fastify adds a HEAD twin to every GET: the GET stands for both.
    return all.filter((r) => !(r.method === 'HEAD' && all.some((g) => g.key === `GET ${r.url}`)));
  };

  it('records the routes of every registrar (health, the object API, the factors, the pages)', () => {
    const keys = new Set(routes().map((r) => r.key));
    for (const k of [
      'GET /healthz',
      'GET /openapi.json',
      'GET /users/:id',
      'POST /auth/otp/start',
      'GET /signin',
    ])
      expect(keys, k).toContain(k);
    expect(keys.size).toBeGreaterThan(150);
  });

  it('lists every API route, and leaves out only the pages, the OIDC protocol and 405 stand-ins', async () => {
    const missing: string[] = [];
    const hidden: { method: string; url: string }[] = [];
    for (const r of routes()) {
      if (NOT_API.some((n) => n.route.test(r.key))) {
        expect(r.schema, `${r.key} is not API but declares a schema`).toBeUndefined();
        continue;
      }
      if (r.schema?.hide) {
        hidden.push(r);
        continue;
      }
      const op = doc.paths[r.url.replace(/:(\w+)/g, '{$1}')]?.[r.method.toLowerCase()];
      if (!op) missing.push(r.key);
    }
    expect(missing).toEqual([]);
    // A route left out as "not an operation" must really only refuse the method.
    expect(hidden.length).toBeGreaterThan(0);
    for (const r of hidden) {
      const res = await s.req({ method: r.method as 'GET', url: r.url.replace(/:(\w+)/g, 'x') });
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(405);
    }
  });

  it('describes every path parameter, an answer of every operation, and only known schemas', () => {
    const refs = JSON.stringify(doc).match(/#\/components\/schemas\/[A-Za-z]+/g) ?? [];
    for (const r of new Set(refs))
      expect(doc.components.schemas, r).toHaveProperty(r.split('/').pop() as string);
    for (const [path, item] of Object.entries(doc.paths)) {
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const [method, op] of Object.entries(item)) {
        const declared = (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
        expect(declared.sort(), `${method} ${path}`).toEqual([...inPath].sort());
        expect(Object.keys(op.responses).length, `${method} ${path}`).toBeGreaterThan(0);
      }
    }
  });

  it('describes the error answers with the one Error schema', () => {
    const op = doc.paths['/auth/vouch/{id}']?.delete as { responses: Record<string, unknown> };
    expect(op.responses['404']).toEqual({
      description: 'No such request',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    });
  });
});
