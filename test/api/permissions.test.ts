import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Account } from '../../src/objects/account.js';
import { Membership } from '../../src/objects/membership.js';
import { Metric } from '../../src/objects/metric.js';
import { typeByKind } from '../../src/objects/registry.js';
import { RemoteAgent } from '../../src/objects/remoteagent.js';
import { ScriptLog } from '../../src/objects/scriptlog.js';
import type { ObjectType } from '../../src/schema/type.js';
import { docTable } from '../docs.js';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';

const SCOPES = ['user', 'audit', 'sync', 'admin'] as const;
const SYSTEM_TYPES: ObjectType[] = [Account, Membership, Metric, RemoteAgent, ScriptLog];

const createBody = (kind: string, n: number): Record<string, unknown> =>
  ({
    ActivationCode: { Code: 'abcdef123' },
    APIKey: { Scopes: ['user'] },
    App: { Name: `app-${n}` },
    Group: { Name: `group-${n}` },
    User: { Email: `u${n}@example.com` },
  })[kind] ?? {};

describe.each(backends())('the permission matrix of docs/api.md holds on %s', (backend) => {
  let s: TestService;
  /** A user per non-admin scope, and a key with just that scope. */
  const who: Record<string, { userId: string; key: string }> = {};
  let n = 0;

  let groupId = '';
  beforeAll(async () => {
    s = await startTestService(backend);
    for (const scope of SCOPES) {
      if (scope === 'admin') {
        who[scope] = { userId: s.adminId, key: await s.keyFor(['admin'], s.adminId) };
        continue;
      }
      const u = await s.req({
        method: 'POST',
        url: '/users',
        payload: { Email: `${scope}@example.com`, Active: true },
      });
      const userId = u.headers['x-id'] as string;
      who[scope] = { userId, key: await s.keyFor([scope], userId) };
    }
    for (const t of SYSTEM_TYPES) await s.store.systemPut(t, `sys-${t.path}`, () => ({ doc: {} }));
    // A group for the privilege-bearing fields that name one (their references are checked).
    const g = await s.req({ method: 'POST', url: '/groups', payload: { Name: 'privileged-group' } });
    groupId = g.headers['x-id'] as string;
  });
  afterAll(async () => s?.close());

  /** Creates an object (as admin) owned by `owner` where the type has an owner; returns id and etag. */
  async function makeObject(type: ObjectType, owner: string): Promise<{ id: string; etag: string }> {
    n++;
    if (SYSTEM_TYPES.includes(type)) {
      const doc = type.ownerField ? { [type.ownerField]: owner } : {};
      const o = await s.store.systemPut(type, `sys-${type.path}-${n}`, () => ({ doc }));
      return { id: o!.id, etag: o!.etag };
    }
    const body = { ...createBody(type.kind, n) };
    if (type.ownerField === 'UserID') body.UserID = owner;
    const res =
      type.identity === 'named'
        ? await s.req({ method: 'POST', url: `/${type.path}/h${n}.example.com`, payload: body })
        : await s.req({ method: 'POST', url: `/${type.path}`, payload: body });
    expect(res.statusCode, res.body).toBe(201);
    return { id: res.headers['x-id'] as string, etag: res.headers.etag as string };
  }

  async function attempt(type: ObjectType, op: string, key: string, target?: { id: string; etag: string }) {
    const url = type.identity === 'singleton' ? `/${type.path}` : `/${type.path}/${target?.id}`;
    switch (op) {
      case 'list':
        return s.req({ method: 'GET', url: `/${type.path}`, key });
      case 'get':
        return s.req({ method: 'GET', url, key });
      case 'create':
        n++;
        return type.identity === 'named'
          ? s.req({
              method: 'POST',
              url: `/${type.path}/c${n}.example.com`,
              payload: createBody(type.kind, n),
              key,
            })
          : s.req({ method: 'POST', url: `/${type.path}`, payload: createBody(type.kind, n), key });
      case 'update': {
        const current = await s.req({ method: 'GET', url });
        return s.req({
          method: 'PUT',
          url,
          payload: current.json(),
          headers: { 'if-match': current.headers.etag as string },
          key,
        });
      }
      default: {
        const current = await s.req({ method: 'GET', url });
        return s.req({ method: 'DELETE', url, headers: { 'if-match': current.headers.etag as string }, key });
      }
    }
  }

  const allowed: Record<string, number[]> = {
    list: [200],
    get: [200],
    create: [201],
    update: [204, 304],
    delete: [204],
  };

  // Cells: [type, op, user, audit, sync, admin].
  for (const [kind, op, ...cells] of docTable('permissions')) {
    for (const [i, scope] of SCOPES.entries()) {
      const cell = cells[i];
      it(`${kind} ${op} with scope ${scope}: ${cell}`, async () => {
        const type = typeByKind.get(kind as string)!;
        const me = who[scope]!;
        const other = s.adminId === me.userId ? who.user!.userId : s.adminId;
        // The caller's own User is the object for User; deleting it would revoke the key, so delete a fresh one.
        const own =
          type.kind === 'User' && op !== 'delete'
            ? { id: me.userId, etag: '' }
            : type.identity === 'singleton'
              ? { id: 'tenant', etag: '' }
              : await makeObject(type, me.userId);
        if (cell === 'yes') {
          const res = await attempt(type, op as string, me.key, own);
          expect(allowed[op as string], res.body).toContain(res.statusCode);
        } else if (cell === 'no') {
          const res = await attempt(type, op as string, me.key, own);
          expect(res.statusCode, res.body).toBe(403);
          expect(res.headers['x-error-code']).toBe('Forbidden');
        } else {
          expect(cell).toBe('own');
          const theirs = type.kind === 'User' ? { id: other, etag: '' } : await makeObject(type, other);
          if (op === 'list') {
            const res = await attempt(type, op, me.key);
            expect(res.statusCode).toBe(200);
            const ids = jsonLines(res.body).map((l) => l.ID);
            expect(ids).toContain(own.id);
            expect(ids).not.toContain(theirs.id);
            for (const l of jsonLines(res.body))
              expect((l.Item as Record<string, unknown>)[type.ownerField!]).toBe(me.userId);
          } else {
            const mine = await attempt(type, op as string, me.key, own);
            expect(allowed[op as string], mine.body).toContain(mine.statusCode);
            const notMine = await attempt(type, op as string, me.key, theirs);
            expect(notMine.statusCode).toBe(404);
          }
        }
      });
    }
  }

  /** A value of each privilege-bearing field that grants access (test/api/docs.test.ts wants one per rule). */
  const privilegedValue = (kind: string, field: string, me: { userId: string }): unknown => {
    const other = me.userId === s.adminId ? who.user!.userId : s.adminId;
    const values: Record<string, unknown> = {
      'User.Admin': true,
      'APIKey.Scopes': ['admin'],
      'APIKey.UserID': other,
      'ActivationCode.UserID': other,
      'ActivationCode.GroupID': groupId,
      'App.AccessGroups': ['g-ops'],
      'App.ProxyAuth': 'none',
      'App.OIDC': { Enabled: true, RedirectURIs: ['https://evil.example/cb'] },
      'VirtualHost.AppID': 'app-other',
      'VirtualHost.Upstream': 'http://10.9.8.7:8080',
      'VirtualHost.Auth': 'none',
      'Tenant.RequireActivationCode': true,
      'Tenant.IntegrityRead': 3,
      'Tenant.IntegrityWrite': 3,
      'Tenant.IntegrityCredentials': 3,
      'Tenant.IntegrityAdmin': 4,
      'Tenant.ScriptTimeLimitMs': 1000,
      'Tenant.ScriptMemoryLimitBytes': 67_108_864,
      'Tenant.ScriptStackLimitBytes': 1_048_576,
      'Tenant.ScriptOutputLimitBytes': 1_048_576,
      'Tenant.ScriptLogRetentionSeconds': 31_536_000,
      'Tenant.LocationLevel': 4,
      'Tenant.LocationRegions': ['Office: 0,0,1'],
      'Tenant.FederationLinkByEmail': true,
    };
    expect(Object.hasOwn(values, `${kind}.${field}`), `a privileged value for ${kind}.${field}`).toBe(true);
    return values[`${kind}.${field}`];
  };

  const expectCell = (
    res: { statusCode: number; body: string; headers: Record<string, unknown> },
    cell: string,
    ok: number[],
  ) => {
    if (cell === 'yes') expect(ok, res.body).toContain(res.statusCode);
    else {
      expect(cell).toBe('no');
      expect(res.statusCode, res.body).toBe(403);
      expect(res.headers['x-error-code']).toBe('Forbidden');
    }
  };

  // Cells: [type, field, rule, user, audit, sync, admin]: may the scope set the field to a value that grants access?
  for (const [kind, field, , ...cells] of docTable('field-rules')) {
    for (const [i, scope] of SCOPES.entries()) {
      const cell = cells[i] as string;
      it(`${kind}.${field} set with scope ${scope}: ${cell}`, async () => {
        const type = typeByKind.get(kind as string)!;
        const me = who[scope]!;
        const value = privilegedValue(type.kind, field as string, me);
        if (type.ops.includes('create')) {
          n++;
          const body = { ...createBody(type.kind, n), [field as string]: value };
          const res =
            type.identity === 'named'
              ? await s.req({
                  method: 'POST',
                  url: `/${type.path}/f${n}.example.com`,
                  payload: body,
                  key: me.key,
                })
              : await s.req({ method: 'POST', url: `/${type.path}`, payload: body, key: me.key });
          expectCell(res, cell, [201]);
          if (cell === 'no' && access(me.key, type, 'create')) expect(res.json().Field).toBe(field);
        }
        // An update of an object the scope may otherwise change: its own User, or one it could create.
        const target =
          type.identity === 'singleton'
            ? { id: 'tenant' }
            : type.kind === 'User'
              ? { id: me.userId === s.adminId ? who.user!.userId : me.userId }
              : await makeObject(type, me.userId);
        const url = type.identity === 'singleton' ? `/${type.path}` : `/${type.path}/${target.id}`;
        const current = await s.req({ method: 'GET', url });
        const res = await s.req({
          method: 'PUT',
          url,
          payload: { ...(current.json() as object), [field as string]: value },
          headers: { 'if-match': current.headers.etag as string },
          key: me.key,
        });
        expectCell(res, cell, [204]);
        if (cell === 'no' && access(me.key, type, 'update')) expect(res.json().Field).toBe(field);
        const after = await s.req({ method: 'GET', url });
        if (cell === 'no') expect(after.json()[field as string]).toEqual(current.json()[field as string]);
        else if (type.kind === 'User') {
          // Put the user back, so the other cells see a plain user.
          await s.req({
            method: 'PUT',
            url,
            payload: { ...(after.json() as object), Admin: false },
            headers: { 'if-match': after.headers.etag as string },
          });
        }
      });
    }
  }

  /** Whether the matrix lets the key's scopes do this at all (field rules apply only then). */
  function access(key: string, type: ObjectType, op: string): boolean {
    const scope = SCOPES.find((sc) => who[sc]?.key === key)!;
    if (scope === 'admin') return true;
    const row = docTable('permissions').find((r) => r[0] === type.kind && r[1] === op);
    return row !== undefined && row[2 + SCOPES.indexOf(scope)] !== 'no';
  }

  /** Objects that stand for privileges: an administrator, and an admin key (of the caller's own user). */
  async function privilegedObject(kind: string, me: { userId: string }): Promise<{ url: string }> {
    if (kind === 'User') {
      n++;
      const u = await s.req({
        method: 'POST',
        url: '/users',
        payload: { Email: `adm${n}@example.com`, Admin: true },
      });
      expect(u.statusCode, u.body).toBe(201);
      return { url: `/users/${u.headers['x-id']}` };
    }
    if (kind === 'Group' || kind === 'AccountChange') {
      n++;
      const admin = await s.req({
        method: 'POST',
        url: '/users',
        payload: { Email: `adm${n}@example.com`, Admin: true, Active: true },
      });
      const adminId = admin.headers['x-id'] as string;
      if (kind === 'Group') {
        // A group an administrator is in: who approves it, or joins it, gains power over him.
        const g = await s.req({ method: 'POST', url: '/groups', payload: { Name: `with-admin-${n}` } });
        const gid = g.headers['x-id'] as string;
        const m = await s.req({ method: 'POST', url: `/groups/${gid}/members/${adminId}` });
        expect(m.statusCode, m.body).toBe(201);
        return { url: `/groups/${gid}` };
      }
      const app = await s.req({ method: 'POST', url: '/apps', payload: { Name: `app-${n}` } });
      const c = await s.req({
        method: 'POST',
        url: '/accountchanges',
        payload: { UserID: adminId, AppID: app.headers['x-id'], Action: 'create', AccountName: `adm${n}` },
      });
      expect(c.statusCode, c.body).toBe(201);
      return { url: `/accountchanges/${c.headers['x-id']}` };
    }
    expect(kind).toBe('APIKey');
    const k = await s.req({
      method: 'POST',
      url: '/apikeys',
      payload: { Scopes: ['admin'], UserID: me.userId === '' ? s.adminId : me.userId },
    });
    expect(k.statusCode, k.body).toBe(201);
    return { url: `/apikeys/${k.headers['x-id']}` };
  }

  // Cells: [type, when, user, audit, sync, admin]: may the scope change or delete such an object?
  for (const [kind, , ...cells] of docTable('privileged-objects')) {
    for (const [i, scope] of SCOPES.entries()) {
      const cell = cells[i] as string;
      for (const op of ['update', 'delete'] as const) {
        it(`privileged ${kind} ${op} with scope ${scope}: ${cell}`, async () => {
          const me = who[scope]!;
          const { url } = await privilegedObject(kind as string, me);
          const current = await s.req({ method: 'GET', url });
          const headers = { 'if-match': current.headers.etag as string };
          const body = current.json();
          if (kind === 'User') body.Email = `taken-${n}@example.com`;
          else if (kind === 'AccountChange') body.Reason = 'renamed';
          else body.Name = kind === 'Group' ? `renamed-${n}` : 'renamed';
          const res =
            op === 'update'
              ? await s.req({ method: 'PUT', url, payload: body, headers, key: me.key })
              : await s.req({ method: 'DELETE', url, headers, key: me.key });
          expectCell(res, cell, op === 'update' ? [204] : [204]);
          if (cell === 'no') expect((await s.req({ method: 'GET', url })).json()).toEqual(current.json());
        });
      }
    }
  }
});
