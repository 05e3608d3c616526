/**
 * Finding 3: privilege-bearing fields and privileged objects. Nobody grants more than they hold:
 * a sync key (or any principal below admin) must not make anyone an administrator, list scopes it
 * lacks on a key, take over or lock out an administrator, or revoke a more powerful credential,
 * however the body is spelt. docs/api.md, "Privilege-bearing fields" and "Privileged objects".
 *
 * Longer than ~400 lines on purpose: a suite of independent attack cases on one mechanism, each
 * readable on its own; splitting it would scatter the shared set-up, not make a case easier to read.
 */
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser, makeUser, signedIn } from '../auth/client.js';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';
import { setTenant } from '../kit/index.js';

const PW = 'correct horse battery staple';

describe.each(backends())('privilege-bearing fields on %s', (backend) => {
  let s: TestService;
  let n = 0;
  /** Callers: API keys by scope (user/sync keys belong to plain users), and browser sessions. */
  type Caller = { name: string; send: (o: Req) => Promise<LightMyRequestResponse>; userId: string };
  type Req = { method: string; url: string; payload?: object; headers?: Record<string, string> };
  const callers: Caller[] = [];
  /** Who must succeed; everyone else must be refused. */
  const POWERFUL = new Set(['admin key', 'admin session at IntegrityAdmin']);

  const viaKey = (name: string, key: string, userId: string): Caller => ({
    name,
    userId,
    send: (o) => s.req({ ...o, method: o.method as 'GET', key }),
  });
  const viaBrowser = (name: string, b: Browser, userId: string): Caller => ({
    name,
    userId,
    send: (o) =>
      b.req({ method: o.method, url: o.url, headers: o.headers, ...(o.payload ? { json: o.payload } : {}) }),
  });

  beforeAll(async () => {
    s = await startTestService(backend);
    const plain = await makeUser(s, { email: 'plain@example.com', password: PW });
    const syncer = await makeUser(s, { email: 'syncer@example.com' });
    const auditor = await makeUser(s, { email: 'auditor@example.com' });
    const boss = await makeUser(s, { email: 'boss@example.com', password: PW, admin: true });
    // IntegrityAdmin 2: a password session is an administrator's, an e-mail-only one (level 1) is below.
    await setTenant(s, { IntegrityAdmin: 2, IntegrityRead: 1 });
    callers.push(
      viaKey('user key', await s.keyFor(['user'], plain), plain),
      viaKey('audit key', await s.keyFor(['audit'], auditor), auditor),
      viaKey('sync key', await s.keyFor(['sync'], syncer), syncer),
      viaKey('sync key of no user', await s.keyFor(['sync']), ''),
      viaKey('user+audit+sync key', await s.keyFor(['user', 'audit', 'sync'], syncer), syncer),
      viaKey('admin key', s.adminKey, s.adminId),
      viaBrowser('session of a plain user', await signedIn(s, 'plain@example.com', PW), plain),
      viaBrowser('admin session below IntegrityAdmin', await identifiedOnly('boss@example.com'), boss),
      viaBrowser('admin session at IntegrityAdmin', await signedIn(s, 'boss@example.com', PW), boss),
    );
  });
  afterAll(async () => s?.close());

  async function identifiedOnly(email: string): Promise<Browser> {
    const b = new Browser(s);
    expect((await b.post('/auth/email', { email })).statusCode).toBe(204);
    return b;
  }

  const adminCount = async () =>
    jsonLines((await s.req({ method: 'GET', url: '/users?filter=Admin%20%3D%20true' })).body).length;

  async function newUser(admin: boolean): Promise<string> {
    n++;
    const r = await s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: `t${n}@example.com`, Admin: admin },
    });
    expect(r.statusCode, r.body).toBe(201);
    return r.headers['x-id'] as string;
  }

  async function put(c: Caller, url: string, change: (doc: Record<string, unknown>) => void) {
    const cur = await s.req({ method: 'GET', url });
    const doc = cur.json() as Record<string, unknown>;
    change(doc);
    return c.send({ method: 'PUT', url, payload: doc, headers: { 'if-match': cur.headers.etag as string } });
  }

  async function del(c: Caller, url: string) {
    const cur = await s.req({ method: 'GET', url });
    return c.send({ method: 'DELETE', url, headers: { 'if-match': cur.headers.etag as string } });
  }

  /** Every attack: `setup` (as admin) makes its target, `run` is one request by the caller. */
  type Attack = {
    name: string;
    ok: number;
    setup?: (c: Caller) => Promise<string>;
    run: (c: Caller, target: string) => Promise<LightMyRequestResponse>;
  };
  const newAdmin = async () => `/users/${await newUser(true)}`;
  /** A plain (not Admin) user holding a key with these scopes. */
  const holderOf = async (scopes: string[]) => {
    const id = await newUser(false);
    await s.keyFor(scopes, id);
    return `/users/${id}`;
  };
  const attacks: Attack[] = [
    {
      name: 'create a user with Admin true',
      ok: 201,
      run: (c) =>
        c.send({ method: 'POST', url: '/users', payload: { Email: `new${++n}@example.com`, Admin: true } }),
    },
    {
      name: 'promote a plain user (Admin true)',
      ok: 204,
      setup: async () => `/users/${await newUser(false)}`,
      run: (c, url) => put(c, url, (d) => (d.Admin = true)),
    },
    {
      name: 'promote oneself',
      ok: 204,
      // An administrator cannot promote itself: a fresh user stands in for it.
      setup: async (c) =>
        c.userId === '' || (await s.req({ method: 'GET', url: `/users/${c.userId}` })).json().Admin
          ? `/users/${await newUser(false)}`
          : `/users/${c.userId}`,
      run: (c, url) => put(c, url, (d) => (d.Admin = true)),
    },
    {
      name: 'demote an administrator (Admin false)',
      ok: 204,
      setup: newAdmin,
      run: (c, url) => put(c, url, (d) => (d.Admin = false)),
    },
    {
      name: "change an administrator's Email (account recovery takeover)",
      ok: 204,
      setup: newAdmin,
      run: (c, url) => put(c, url, (d) => (d.Email = `evil${++n}@example.com`)),
    },
    {
      name: "change an administrator's UserName",
      ok: 204,
      setup: newAdmin,
      run: (c, url) => put(c, url, (d) => (d.UserName = `evil${++n}`)),
    },
    {
      name: "add an address to an administrator's OtherEmails",
      ok: 204,
      setup: newAdmin,
      run: (c, url) => put(c, url, (d) => (d.OtherEmails = [`evil${++n}@example.com`])),
    },
    {
      name: 'disable an administrator',
      ok: 204,
      setup: newAdmin,
      run: (c, url) => put(c, url, (d) => (d.Disabled = true)),
    },
    {
      name: 'suspend an administrator',
      ok: 204,
      setup: newAdmin,
      run: (c, url) => put(c, url, (d) => (d.SuspendAfter = '2001-01-01T00:00:00Z')),
    },
    {
      name: 'delete an administrator',
      ok: 204,
      setup: newAdmin,
      run: (c, url) => del(c, url),
    },
    {
      name: 'disable a plain user who holds an admin key (revoking the key)',
      ok: 204,
      setup: async () => holderOf(['admin']),
      run: (c, url) => put(c, url, (d) => (d.Disabled = true)),
    },
    {
      name: "change the Email of a plain user who holds an admin key (taking the key's user over)",
      ok: 204,
      setup: async () => holderOf(['admin']),
      run: (c, url) => put(c, url, (d) => (d.Email = `evil${++n}@example.com`)),
    },
    {
      name: 'delete a plain user who holds an admin key',
      ok: 204,
      setup: async () => holderOf(['admin']),
      run: (c, url) => del(c, url),
    },
    {
      name: 'create an admin API key for oneself',
      ok: 201,
      run: (c) =>
        c.send({ method: 'POST', url: '/apikeys', payload: { Scopes: ['admin'], UserID: c.userId } }),
    },
    {
      name: 'create a key for another user',
      ok: 201,
      setup: (): Promise<string> => newUser(false),
      run: (c, other) => c.send({ method: 'POST', url: '/apikeys', payload: { UserID: other } }),
    },
    {
      name: 'revoke an admin key of one’s own user',
      ok: 204,
      setup: async (c) => {
        const k = await s.req({
          method: 'POST',
          url: '/apikeys',
          payload: { Scopes: ['admin'], UserID: c.userId || s.adminId },
        });
        return `/apikeys/${k.headers['x-id']}`;
      },
      run: (c, url) => del(c, url),
    },
  ];

  /** Every user and key as stored: a refused attack must leave it exactly as it was. */
  const snapshot = async () =>
    `${(await s.req({ method: 'GET', url: '/users' })).body}${(await s.req({ method: 'GET', url: '/apikeys' })).body}`;

  for (const attack of attacks) {
    it(`${attack.name}: only admin credentials succeed`, async () => {
      for (const c of callers) {
        const target = (await attack.setup?.(c)) ?? '';
        const before = await snapshot();
        const res = await attack.run(c, target);
        if (POWERFUL.has(c.name)) {
          expect(res.statusCode, `${c.name}: ${res.body}`).toBe(attack.ok);
          continue;
        }
        // The admin session below IntegrityAdmin is asked to step up; everyone else is forbidden.
        const want = c.name === 'admin session below IntegrityAdmin' ? 401 : 403;
        expect(res.statusCode, `${c.name}: ${res.body}`).toBe(want);
        expect(await snapshot(), c.name).toBe(before);
      }
    });
  }

  it('a refused field is named in the error (403 Forbidden, Field)', async () => {
    const sync = callers.find((c) => c.name === 'sync key')!;
    const res = await sync.send({
      method: 'POST',
      url: '/users',
      payload: { Email: 'x1@example.com', Admin: true },
    });
    expect(res.statusCode).toBe(403);
    expect(res.headers['x-error-code']).toBe('Forbidden');
    expect(res.json()).toMatchObject({ Field: 'Admin' });
  });

  it('sync still manages plain users: create, change, disable, delete (Admin false is no privilege)', async () => {
    const sync = callers.find((c) => c.name === 'sync key')!;
    const r = await sync.send({
      method: 'POST',
      url: '/users',
      payload: { Email: 'plain2@example.com', Admin: false },
    });
    expect(r.statusCode, r.body).toBe(201);
    const url = `/users/${r.headers['x-id']}`;
    expect((await put(sync, url, (d) => (d.Email = 'plain3@example.com'))).statusCode).toBe(204);
    expect((await put(sync, url, (d) => (d.Disabled = true))).statusCode).toBe(204);
    expect((await del(sync, url)).statusCode).toBe(204);
  });

  it('a user holding a key stands for its scopes (except user): sync alone may not revoke an audit key that way', async () => {
    const sync = callers.find((c) => c.name === 'sync key')!;
    const wide = callers.find((c) => c.name === 'user+audit+sync key')!;
    const auditHolder = await holderOf(['audit', 'user']);
    const refused = await put(sync, auditHolder, (d) => (d.Disabled = true));
    expect(refused.statusCode, refused.body).toBe(403);
    expect(refused.json().Message).toMatch(/audit/);
    expect((await put(wide, auditHolder, (d) => (d.Disabled = true))).statusCode).toBe(204);
    // user and sync keys are no obstacle for a sync caller: it holds what they give.
    const plain = await holderOf(['user', 'sync']);
    expect((await put(sync, plain, (d) => (d.Disabled = true))).statusCode).toBe(204);
    expect((await del(sync, plain)).statusCode).toBe(204);
  });

  it('If-Match: * or a list naming an older version cannot slip a change past the check', async () => {
    // The write is pinned to the version that was checked: it cannot land on a newer one.
    const sync = callers.find((c) => c.name === 'sync key')!;
    const id = await newUser(false);
    const cur = await s.req({ method: 'GET', url: `/users/${id}` });
    const doc = cur.json() as Record<string, unknown>;
    await put(callers.find((c) => c.name === 'admin key')!, `/users/${id}`, (d) => (d.Admin = true));
    const res = await sync.send({
      method: 'PUT',
      url: `/users/${id}`,
      payload: { ...doc, Email: 'stolen@example.com' },
      headers: { 'if-match': `${cur.headers.etag}, *` },
    });
    expect([403, 412]).toContain(res.statusCode);
    expect((await s.req({ method: 'GET', url: `/users/${id}` })).json().Email).not.toBe('stolen@example.com');
  });

  // ---- generated spellings ---------------------------------------------------------------------

  /** Spellings of "Admin" that are not the declared field name. */
  const variant = fc.oneof(
    fc
      .array(fc.boolean(), { minLength: 5, maxLength: 5 })
      .map((up) => [...'admin'].map((ch, i) => (up[i] ? ch.toUpperCase() : ch)).join(''))
      .filter((v) => v !== 'Admin'),
    fc.constantFrom(
      'Admin ',
      ' Admin',
      'Adm\u0131n',
      'Admin\u0000',
      'ADMIN',
      'admin',
      'Admin\u200b',
      'Admin.',
    ),
  );
  /** A value that grants admin in a lax reader. */
  const truthy = fc.constantFrom<unknown>(true, 'true', 1, 'yes', [true], { value: true });

  /** Raw JSON body text: the privilege sneaked in by duplicate keys, variants, prototypes or nesting. */
  const body = fc
    .record({
      shape: fc.constantFrom(
        'variant',
        'escaped',
        'duplicate-last',
        'duplicate-first',
        'proto',
        'constructor',
        'nested',
      ),
      escapes: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
      name: variant,
      value: truthy,
      email: fc.integer({ min: 0, max: 1e9 }),
    })
    .map(({ shape, name, value, email, escapes }) => {
      const base = `"Email":"g${email}@example.com"`;
      const v = JSON.stringify(value);
      switch (shape) {
        case 'variant':
          return `{${base},${JSON.stringify(name)}:${v}}`;
        case 'escaped': {
          // The declared name itself, written with JSON \u escapes: JSON.parse reads it as "Admin".
          const key = [...'Admin']
            .map((ch, i) => (escapes[i] ? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}` : ch))
            .join('');
          return `{${base},"${key}":${v}}`;
        }
        case 'duplicate-last':
          return `{${base},"Admin":false,"Admin":true}`;
        case 'duplicate-first':
          return `{${base},"Admin":true,${JSON.stringify(name)}:false}`;
        case 'proto':
          return `{${base},"__proto__":{"Admin":true}}`;
        case 'constructor':
          return `{${base},"constructor":{"prototype":{"Admin":true}}}`;
        default:
          return `{${base},"Name":{"Admin":true,"FullName":"x"}}`;
      }
    });

  it('no spelling of the field makes anyone an administrator through a sync key (create and update)', async () => {
    const target = await newUser(false);
    const start = await adminCount();
    await fc.assert(
      fc.asyncProperty(body, fc.boolean(), async (text, update) => {
        const cur = update ? await s.req({ method: 'GET', url: `/users/${target}` }) : undefined;
        const res = await s.app.inject({
          method: update ? 'PUT' : 'POST',
          url: update ? `/users/${target}` : '/users',
          payload: text.replace(/"Email":"[^"]*"/, update ? `"Email":"target@example.com"` : '$&'),
          headers: {
            authorization: `Bearer ${await syncKey()}`,
            'content-type': 'application/json',
            ...(cur ? { 'if-match': cur.headers.etag as string } : {}),
          },
        });
        // Refused (400 unknown field / invalid JSON, 403 privilege), or stored without the privilege.
        expect([201, 204, 304, 400, 403], res.body).toContain(res.statusCode);
        if (res.statusCode < 300) {
          const id = update ? target : (res.headers['x-id'] as string);
          const stored = (await s.req({ method: 'GET', url: `/users/${id}` })).json();
          expect(stored.Admin).toBe(false);
          expect(Object.keys(stored)).not.toContain('admin');
        }
        // Where the body as parsed (last key wins, escapes decoded) says Admin true: the 403 naming it.
        // (A body that also has an unknown field is refused for that first: 400.)
        const parsed = JSON.parse(text) as Record<string, unknown>;
        if (parsed.Admin === true && Object.keys(parsed).every((k) => k === 'Email' || k === 'Admin')) {
          expect(res.statusCode, text).toBe(403);
          expect(res.json().Field).toBe('Admin');
        }
        expect(await adminCount()).toBe(start);
      }),
      { numRuns: 60 },
    );
  });

  let syncKeyValue: string | undefined;
  const syncKey = async () => {
    syncKeyValue ??= await s.keyFor(['sync'], await newUser(false));
    return syncKeyValue;
  };

  /** Scope lists a key could ask for, in any order and with repeats. */
  const scopeList = fc.array(fc.constantFrom('user', 'audit', 'sync', 'admin'), { maxLength: 6 });

  it('no key ever lists a scope its creator lacks, in any order or repetition (APIKey.Scopes)', async () => {
    // Keys are admin-only in the matrix today; the field rule holds even so, as checked directly.
    const { checkFieldRules } = await import('../../src/policy/grants.js');
    const { SCOPES } = await import('../../src/schema/type.js');
    await fc.assert(
      fc.property(
        fc.subarray([...SCOPES].filter((x) => x !== 'admin')),
        scopeList,
        fc.constantFrom('', 'me', 'other'),
        fc.boolean(),
        (held, asked, owner, isUpdate) => {
          const p = { via: 'apikey' as const, userId: 'me', scopes: new Set(held) };
          const doc = { Scopes: asked, UserID: owner };
          const previous = isUpdate ? { Scopes: ['user'], UserID: 'me' } : undefined;
          const effective = asked.length === 0 ? ['user'] : asked;
          const scopesChanged = !isUpdate || JSON.stringify(asked) !== JSON.stringify(['user']);
          const ownerChanged = !isUpdate || owner !== 'me';
          const effectiveOwner = owner === '' && !isUpdate ? 'me' : owner;
          const allowed =
            (!scopesChanged || effective.every((x) => held.includes(x as never))) &&
            (!ownerChanged || effectiveOwner === 'me');
          const run = () => checkFieldRules(p, 'APIKey', doc, previous, { Scopes: [], UserID: '' });
          if (allowed) expect(run).not.toThrow();
          else expect(run).toThrow(/may (list only scopes|name only your own user)/);
        },
      ),
      { numRuns: 300 },
    );
  });
});
