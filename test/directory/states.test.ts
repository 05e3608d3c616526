import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE_TRANSITIONS, type ChangeState, PLAN_TRANSITIONS } from '../../src/directory/states.js';
import { AccountChange, CHANGE_STATES } from '../../src/objects/accountchange.js';
import { AccountChangePlan } from '../../src/objects/accountchangeplan.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { world } from './fixture.js';

/** The rows of the markdown table under `heading` in docs/directory.md. */
function docTable(heading: string): string[][] {
  const text = readFileSync(new URL('../../docs/directory.md', import.meta.url), 'utf8');
  const start = text.indexOf(heading);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const lines = text.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const end = lines.findIndex((l, i) => i > first && !l.startsWith('|'));
  return lines.slice(first + 2, end).map((l) =>
    l
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim()),
  );
}

describe('the change lifecycle table', () => {
  it('is the same in docs/directory.md and src/directory/states.ts', () => {
    const rows = docTable('## The lifecycle of a change');
    expect(rows).toHaveLength(CHANGE_TRANSITIONS.length);
    CHANGE_TRANSITIONS.forEach((t, i) => {
      const [op, , from, to] = rows[i] as string[];
      expect(op?.split(' ')[0]).toBe(t.op);
      expect(from?.split(',').map((x) => x.trim())).toEqual([...t.from]);
      expect(to).toBe(t.to);
    });
    // Every state is reachable and named in the object's field.
    expect(new Set(CHANGE_TRANSITIONS.map((t) => t.to))).toEqual(
      new Set(CHANGE_STATES.filter((s) => s !== 'planned')),
    );
  });
});

/** Walks every (operation, role, state) the API exposes to admin and sync keys against the table. */
describe.each(backends())('the change and plan lifecycles through the API on %s', (backend) => {
  let s: TestService;
  let w: Awaited<ReturnType<typeof world>>;
  beforeAll(async () => {
    s = await startTestService(backend);
    w = await world(s);
  });
  afterAll(async () => s?.close());

  let users = 0;
  // Each change for a user of its own: one account has at most one change in progress (the
  // Applying key), so forcing several changes of one account into in_progress would collide.
  const changeIn = async (state: ChangeState) => {
    const u = await s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: `st${++users}-${w.tag}@example.com` },
    });
    const r = await s.req({
      method: 'POST',
      url: '/accountchanges',
      payload: { UserID: String(u.headers['x-id']), AppID: w.appId, Action: 'create' },
    });
    const id = r.headers['x-id'] as string;
    await s.store.systemPut(AccountChange, id, (doc) => (doc ? { doc: { ...doc, State: state } } : null));
    return id;
  };

  it('answers 200 to the transitions the table allows, 403 to roles it never allows, 409 naming the state otherwise', async () => {
    const keys = { admin: s.adminKey, sync: await s.keyFor(['sync']) };
    for (const op of ['approve', 'cancel', 'retry'] as const)
      for (const role of ['admin', 'sync'] as const)
        for (const state of CHANGE_STATES) {
          const id = await changeIn(state);
          const rows = CHANGE_TRANSITIONS.filter((t) => t.op === op && t.by.includes(role));
          const row = rows.find((t) => t.from.includes(state));
          const r = await s.req({ method: 'POST', url: `/accountchanges/${id}/${op}`, key: keys[role] });
          const what = `${op} by ${role} from ${state}`;
          if (rows.length === 0) expect(r.statusCode, what).toBe(403);
          else if (!row) {
            expect(r.statusCode, what).toBe(409);
            expect(r.json().Message, what).toContain(state);
          } else {
            expect(r.statusCode, what).toBe(200);
            expect(r.json().State, what).toBe(row.to);
          }
        }
    expect((await s.req({ method: 'POST', url: '/accountchanges/nosuch00000000/approve' })).statusCode).toBe(
      404,
    );
  });

  it('walks the plan table the same way', async () => {
    const keys = { admin: s.adminKey, sync: await s.keyFor(['sync']) };
    for (const op of ['approve', 'cancel'] as const)
      for (const role of ['admin', 'sync'] as const)
        for (const state of ['proposed', 'approved', 'cancelled'] as const) {
          const p = await s.req({ method: 'POST', url: '/accountchangeplans', payload: { Name: 'p' } });
          const id = p.headers['x-id'] as string;
          await s.store.systemPut(AccountChangePlan, id, (doc) =>
            doc ? { doc: { ...doc, State: state } } : null,
          );
          const rows = PLAN_TRANSITIONS.filter((t) => t.op === op && t.by.includes(role));
          const row = rows.find((t) => (t.from as readonly string[]).includes(state));
          const r = await s.req({ method: 'POST', url: `/accountchangeplans/${id}/${op}`, key: keys[role] });
          const what = `plan ${op} by ${role} from ${state}`;
          expect(r.statusCode, what).toBe(rows.length === 0 ? 403 : row ? 200 : 409);
          if (row) expect(r.json().State, what).toBe(row.to);
        }
  });
});
