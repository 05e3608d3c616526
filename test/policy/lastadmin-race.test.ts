import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, createApiKey } from '../../src/service/bootstrap.js';
import { type Instance, startInstance } from '../events/instance.js';
import { backends, freshLocation } from '../helpers.js';

/**
 * Two changes at once, each ending one of the last two active administrators, cannot both go
 * through: each alone sees the other administrator remain, so they are decided one after the
 * other (src/policy/rules.ts whileAdministratorsHeld). One answers 409 Last Administrator and one
 * active administrator remains, whichever ways are raced and on however many instances.
 */

type Answer = { status: number; text: string; id: string };
type Send = (method: string, path: string, body?: unknown) => Promise<Answer>;

const sender =
  (urls: string[], key: string, pick: () => number): Send =>
  async (method, path, body) => {
    const url = urls[pick() % urls.length] as string;
    const res = await fetch(url + path, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        // Each race is about the decision, not the ETag: any current version.
        ...(method === 'PATCH' || method === 'DELETE' ? { 'if-match': '*' } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, text: await res.text(), id: res.headers.get('x-id') ?? '' };
  };

/** The ways of ending an administrator, each a request against one user. */
const ENDINGS: Record<
  string,
  (send: Send, id: string, plain: string) => Promise<{ status: number; text: string }>
> = {
  demote: (send, id) => send('PATCH', `/users/${id}`, { Admin: false }),
  deactivate: (send, id) => send('PATCH', `/users/${id}`, { Active: false }),
  disable: (send, id) => send('POST', `/users/${id}/disable`, {}),
  delete: (send, id) => send('DELETE', `/users/${id}`),
  merge: (send, id, plain) => send('POST', `/users/${plain}/merge?from=${id}`, {}),
};

const RACES: [string, string][] = [
  ['demote', 'demote'],
  ['demote', 'disable'],
  ['delete', 'deactivate'],
  ['disable', 'merge'],
  ['merge', 'delete'],
];

async function activeAdmins(send: Send): Promise<string[]> {
  const r = await send('GET', `/users?filter=${encodeURIComponent('Admin = true')}`);
  expect(r.status, r.text).toBe(200);
  return r.text
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { Item: Record<string, unknown> }).Item)
    .filter((u) => u.Active === true && u.Disabled !== true && !u.MergedInto)
    .map((u) => String(u.ID));
}

async function newUser(send: Send, tag: string, admin: boolean): Promise<string> {
  const r = await send('POST', '/users', {
    Email: `${tag}-${Math.random().toString(36).slice(2)}@example.com`,
    Admin: admin,
    Active: true,
  });
  expect(r.status, r.text).toBe(201);
  return r.id;
}

function racesOn(label: string, instances: () => Instance[], adminKey: () => string) {
  it(`${label}: of two endings at once, one is refused and one administrator remains`, async () => {
    const urls = instances().map((i) => i.url);
    let turn = 0;
    const send = sender(urls, adminKey(), () => turn++);
    // A user-write script that changes nothing: its run in the script pool (a worker) lets the
    // event loop turn between a change's decision and its write, as any real await would. Without
    // it one SQLite instance would decide and write each change before reading the next request.
    const script = await send('POST', '/scripts', {
      Name: 'idle user-write script',
      Hook: 'user-write',
      Enabled: true,
      Source: 'function hook(input) { return null; }',
    });
    expect(script.status, script.text).toBe(201);
    for (const [first, second] of RACES) {
      // Exactly two active administrators: two new ones, then every other one steps down.
      const a = await newUser(send, 'race-a', true);
      const b = await newUser(send, 'race-b', true);
      for (const other of await activeAdmins(send))
        if (other !== a && other !== b) {
          const r = await send('PATCH', `/users/${other}`, { Admin: false });
          expect(r.status, r.text).toBe(204);
        }
      expect((await activeAdmins(send)).sort()).toEqual([a, b].sort());
      const plainA = await newUser(send, 'plain-a', false);
      const plainB = await newUser(send, 'plain-b', false);
      const answers = await Promise.all([
        (ENDINGS[first] as (typeof ENDINGS)[string])(send, a, plainA),
        (ENDINGS[second] as (typeof ENDINGS)[string])(send, b, plainB),
      ]);
      const statuses = answers.map((r) => r.status);
      expect(
        statuses.filter((s) => s === 409),
        `${first} vs ${second}: ${JSON.stringify(answers)}`,
      ).toHaveLength(1);
      expect(statuses.filter((s) => s < 300)).toHaveLength(1);
      const remaining = await activeAdmins(send);
      expect(remaining, `${first} vs ${second}`).toHaveLength(1);
      // The refused one is the administrator who remains.
      expect(remaining[0]).toBe(statuses[0] === 409 ? a : b);
    }
  });
}

describe.each(backends())('the last administrator, raced, on %s', { timeout: 180_000 }, (backend) => {
  const nodes: Instance[] = [];
  let key = '';
  let cleanup: () => Promise<void> = async () => {};
  beforeAll(async () => {
    const loc = await freshLocation(backend);
    cleanup = loc.cleanup;
    // SQLite is one instance per file; PostgreSQL is raced across two instances sharing it.
    for (let i = 0; i < (backend === 'postgres' ? 2 : 1); i++) nodes.push(await startInstance(loc.location));
    const first = nodes[0] as Instance;
    const adminId = (await bootstrap(first.store)) as string;
    key = await createApiKey(first.store, ['admin'], adminId, 'race admin');
  });
  afterAll(async () => {
    for (const n of nodes) {
      await n.app.close();
      await n.db.close();
    }
    await cleanup();
  });

  racesOn(
    backend === 'postgres' ? 'two instances' : 'one instance',
    () => nodes,
    () => key,
  );
});
