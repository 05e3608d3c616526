import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Membership } from '../../src/groups/membership.js';
import { Account } from '../../src/objects/accounts.js';
import { Metric, RemoteAgent, ScriptLog } from '../../src/objects/misc.js';
import { typeByKind } from '../../src/objects/registry.js';
import type { ObjectType } from '../../src/objects/type.js';
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
});
