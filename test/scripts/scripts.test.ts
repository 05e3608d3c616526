import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Membership } from '../../src/objects/membership.js';
import { ScriptLog } from '../../src/objects/scriptlog.js';
import { refineAccountSuggestions, refineMergeSuggestions } from '../../src/scripts/hooks.js';
import { PRUNE_BATCH, pruneScriptLogs, writeLog } from '../../src/scripts/logs.js';
import { runTests } from '../../src/scripts/testing.js';
import { backends, jsonLines, readLog, startTestService, type TestService } from '../helpers.js';
import { setTenant } from '../kit/index.js';
import { addScript, ctxOf, scriptLogs } from './kit.js';

const testScript = (s: TestService, body: Record<string, unknown>, key?: string) =>
  s.req({ method: 'POST', url: '/scripts/test', payload: body, ...(key ? { key } : {}) });

describe.each(backends())('scripts on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  describe('POST /scripts/test', () => {
    const source = 'function hook(input) { return { Set: { UserName: input.User.Email.split("@")[0] } }; }';
    const tests = JSON.stringify([
      {
        Name: 'derives the user name',
        Input: { User: { Email: 'ada@example.com' } },
        Expect: { Set: { UserName: 'ada' } },
      },
    ]);

    it('answers 204 with no body when every test passes and nothing is logged', async () => {
      const r = await testScript(s, { Hook: 'user-write', Source: source, Tests: tests });
      expect(r.statusCode, r.body).toBe(204);
      expect(r.body).toBe('');
    });

    it('answers 200 with ScriptLog lines when tests pass with console output', async () => {
      const r = await testScript(s, {
        Source: 'function hook(i) { console.log("seen", i.n); return i.n * 2; }',
        Tests: JSON.stringify([{ Name: 'doubles', Input: { n: 21 }, Expect: 42 }]),
      });
      expect(r.statusCode, r.body).toBe(200);
      expect(r.headers['content-type']).toContain('application/x-json-lines');
      const [log] = jsonLines(r.body);
      expect(log).toMatchObject({
        Test: 'doubles',
        Passed: true,
        Console: ['info: seen 21'],
        Result: '42',
        Expected: '42',
      });
      // Each line is a stored ScriptLog.
      const got = await s.req({ url: `/scriptlogs/${String(log?.ID)}` });
      expect(got.statusCode).toBe(200);
      expect(got.json()).toEqual(log);
    });

    it('answers 422 Script Tests Failed with one line per test when one fails', async () => {
      const r = await testScript(s, {
        Source: 'function hook(i) { if (i.boom) throw new Error("boom"); return i.n + 1; }',
        Tests: JSON.stringify([
          { Name: 'adds one', Input: { n: 1 }, Expect: 2 },
          { Name: 'wrong expectation', Input: { n: 1 }, Expect: 3 },
          { Name: 'expects an error', Input: { boom: true }, ExpectError: 'boom' },
          { Name: 'unexpected error', Input: { boom: true }, Expect: 1 },
        ]),
      });
      expect(r.statusCode, r.body).toBe(422);
      expect(r.headers['x-error-code']).toBe('Script Tests Failed');
      const lines = jsonLines(r.body);
      expect(lines.map((l) => [l.Test, l.Passed])).toEqual([
        ['adds one', true],
        ['wrong expectation', false],
        ['expects an error', true],
        ['unexpected error', false],
      ]);
      expect(lines[3]?.Error).toBe('Error: boom');
      expect(lines[1]?.Applied).toContain('differs');
    });

    it('answers 500 Script Compile Failed with the compile error as a ScriptLog line', async () => {
      const r = await testScript(s, {
        Source: 'function hook( { return 1; }',
        Tests: JSON.stringify([{ Input: {} }]),
      });
      expect(r.statusCode, r.body).toBe(500);
      expect(r.headers['x-error-code']).toBe('Script Compile Failed');
      const lines = jsonLines(r.body);
      expect(lines).toHaveLength(1);
      expect(String(lines[0]?.Error)).toMatch(/^SyntaxError/);
      // A script without tests is still compiled.
      const bare = await testScript(s, { Source: 'this is not javascript' });
      expect(bare.statusCode).toBe(500);
      expect((await testScript(s, { Source: 'function hook() {}' })).statusCode).toBe(204);
    });

    it('a hostile test case fails with its limit, it does not hang the request', async () => {
      const r = await testScript(s, {
        Source: 'function hook() { for (;;) {} }',
        Tests: JSON.stringify([{ Name: 'loops', Input: {} }]),
      });
      expect(r.statusCode).toBe(422);
      expect(jsonLines(r.body)[0]).toMatchObject({ LimitsHit: ['time'], Passed: false });
    });

    it('bounds the whole test run: cases left when its time is spent fail as not run', async () => {
      const cases = Array.from({ length: 6 }, (_, i) => ({ Name: `spin ${i}`, Input: {} }));
      const report = await runTests(ctxOf(s), { Source: 'function hook() { for (;;) {} }' }, cases, 250);
      expect(report.verdict).toBe('failed');
      expect(report.logs).toHaveLength(6);
      const notRun = report.logs.filter((l) => String(l.Applied).includes('not run'));
      expect(notRun.length).toBeGreaterThan(0);
      expect(notRun.length).toBeLessThan(6);
    });

    it('refuses a malformed test list (400) and callers that may not create scripts (403)', async () => {
      const bad = await testScript(s, { Source: 'function hook() {}', Tests: '{"not": "a list"}' });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().Field).toBe('Tests');
      for (const scopes of [['sync'], ['audit'], ['user']]) {
        const key = await s.keyFor(scopes, s.adminId);
        expect((await testScript(s, { Source: 'function hook() {}' }, key)).statusCode).toBe(403);
      }
      expect((await s.req({ method: 'POST', url: '/scripts/test', key: '', payload: {} })).statusCode).toBe(
        401,
      );
    });

    it('is routed apart from /scripts/:id', async () => {
      expect((await s.req({ url: '/scripts/test' })).statusCode).toBe(405);
      expect((await s.req({ method: 'POST', url: '/scripts/abc', payload: {} })).statusCode).toBe(405);
      expect((await s.req({ url: '/scripts/nosuchscript' })).statusCode).toBe(404);
    });
  });

  describe('ScriptLogs', () => {
    it('are read-only', async () => {
      const id = (await writeLog(ctxOf(s), { ...blankLog(), Hook: 'x' }))?.id as string;
      const got = await s.req({ url: `/scriptlogs/${id}` });
      expect(got.statusCode).toBe(200);
      const etag = String(got.headers.etag);
      expect((await s.req({ method: 'POST', url: '/scriptlogs', payload: {} })).statusCode).toBe(405);
      expect(
        (
          await s.req({
            method: 'PUT',
            url: `/scriptlogs/${id}`,
            headers: { 'if-match': etag },
            payload: got.json(),
          })
        ).statusCode,
      ).toBe(405);
      expect(
        (await s.req({ method: 'DELETE', url: `/scriptlogs/${id}`, headers: { 'if-match': etag } }))
          .statusCode,
      ).toBe(405);
    });

    it('are on the change log the event stream follows', async () => {
      const before = await s.store.lastPosition();
      const obj = await writeLog(ctxOf(s), { ...blankLog(), Hook: 'event' });
      const changes = (await readLog(s.store, before)).filter((c) => c.type === 'ScriptLog');
      expect(changes.map((c) => c.id)).toContain(obj?.id);
    });

    it('are pruned after the retention period, oldest first, in batches', async () => {
      await setTenant(s, { ScriptLogRetentionSeconds: 3600 });
      const now = Date.now();
      const old: string[] = [];
      for (let i = 0; i < PRUNE_BATCH + 5; i++) {
        const o = await writeLog(ctxOf(s), {
          ...blankLog(),
          Hook: 'old',
          Time: new Date(now - 7200_000 - i * 1000).toISOString(),
        });
        old.push(o?.id as string);
      }
      const fresh = await writeLog(ctxOf(s), {
        ...blankLog(),
        Hook: 'fresh',
        Time: new Date(now - 60_000).toISOString(),
      });
      expect(await pruneScriptLogs(ctxOf(s), now)).toBeGreaterThanOrEqual(PRUNE_BATCH + 5);
      for (const id of [old[0], old[PRUNE_BATCH + 4]])
        expect(await s.store.get(ScriptLog, id as string)).toBeUndefined();
      expect(await s.store.get(ScriptLog, fresh?.id as string)).toBeDefined();
      // Shorter retention: the fresh one goes too.
      await setTenant(s, { ScriptLogRetentionSeconds: 60 });
      expect(await pruneScriptLogs(ctxOf(s), now + 1000)).toBeGreaterThanOrEqual(1);
      expect(await s.store.get(ScriptLog, fresh?.id as string)).toBeUndefined();
      await setTenant(s, { ScriptLogRetentionSeconds: 7 * 86400 });
    });

    it('limits and retention are admin-only tenant settings with bounds', async () => {
      const t = await s.req({ url: '/tenant' });
      expect(t.json()).toMatchObject({
        ScriptTimeLimitMs: 100,
        ScriptMemoryLimitBytes: 16_777_216,
        ScriptStackLimitBytes: 262_144,
        ScriptOutputLimitBytes: 65_536,
      });
      const put = (body: Record<string, unknown>, key?: string) =>
        s.req({
          method: 'PUT',
          url: '/tenant',
          headers: { 'if-match': String(t.headers.etag) },
          payload: { ...(t.json() as Record<string, unknown>), ...body },
          ...(key ? { key } : {}),
        });
      expect((await put({ ScriptTimeLimitMs: 100_000 })).statusCode).toBe(400);
      expect((await put({ ScriptMemoryLimitBytes: 1 << 30 })).statusCode).toBe(400);
      const sync = await s.keyFor(['sync'], s.adminId);
      expect([403]).toContain((await put({ ScriptTimeLimitMs: 1000 }, sync)).statusCode);
    });
  });

  describe('hooks', () => {
    it('user-write: a script derives the Unix user name, and its run is logged', async () => {
      const id = await addScript(
        s,
        'user-write',
        `function hook(input) {
          if (input.User.UserName) return null;
          console.log('deriving for', input.Operation);
          return { Set: { UserName: input.User.Email.split('@')[0].replace(/[^a-z0-9]/g, '') } };
        }`,
      );
      const r = await s.req({
        method: 'POST',
        url: '/users',
        payload: { Email: 'grace.hopper@example.com' },
      });
      expect(r.statusCode, r.body).toBe(201);
      const u = await s.req({ url: `/users/${r.headers['x-id']}` });
      expect(u.json().UserName).toBe('gracehopper');
      const logs = (await scriptLogs(s)).filter((l) => l.ScriptID === id);
      expect(logs.at(-1)).toMatchObject({
        Hook: 'user-write',
        Applied: 'set UserName',
        Console: ['info: deriving for create'],
      });
      expect(JSON.parse(String(logs.at(-1)?.Input)).User.Email).toBe('grace.hopper@example.com');
      await disable(s, id);
    });

    it('user-write: a script may reject a change with a reason; it may not grant Admin', async () => {
      const id = await addScript(
        s,
        'user-write',
        `function hook(input) {
          if (input.User.Email.endsWith('@evil.example')) return { Reject: 'addresses at evil.example are not allowed' };
          return { Set: { Admin: true } };
        }`,
      );
      const bad = await s.req({ method: 'POST', url: '/users', payload: { Email: 'x@evil.example' } });
      expect(bad.statusCode).toBe(422);
      expect(bad.headers['x-error-code']).toBe('Script Rejected');
      expect(bad.json().Message).toBe('addresses at evil.example are not allowed');
      const ok = await s.req({ method: 'POST', url: '/users', payload: { Email: 'y@good.example' } });
      expect(ok.statusCode).toBe(201);
      expect((await s.req({ url: `/users/${ok.headers['x-id']}` })).json().Admin).toBe(false);
      const logs = (await scriptLogs(s)).filter((l) => l.ScriptID === id);
      expect(logs.map((l) => l.Applied).sort()).toEqual([
        'fail-safe: no change (a script may not set Admin)',
        'rejected',
      ]);
      await disable(s, id);
    });

    it('user-write: a failing script changes nothing (fail-safe) and is logged', async () => {
      const id = await addScript(s, 'user-write', 'function hook() { for (;;) {} }');
      const r = await s.req({
        method: 'POST',
        url: '/users',
        payload: { Email: 'z@example.com', UserName: 'zed' },
      });
      expect(r.statusCode).toBe(201);
      expect((await s.req({ url: `/users/${r.headers['x-id']}` })).json().UserName).toBe('zed');
      const log = (await scriptLogs(s)).filter((l) => l.ScriptID === id).at(-1);
      expect(log).toMatchObject({
        LimitsHit: ['time'],
        Applied: expect.stringContaining('fail-safe: no change'),
      });
      await disable(s, id);
    });

    it('group-membership: a script puts users into groups by e-mail domain, and takes them out again', async () => {
      const g = await s.req({ method: 'POST', url: '/groups', payload: { Name: 'engineering' } });
      expect(g.statusCode, g.body).toBe(201);
      const gid = String(g.headers['x-id']);
      const id = await addScript(
        s,
        'group-membership',
        `function hook(input) { return { Groups: input.User.Email.endsWith('@eng.example') ? [${JSON.stringify(gid)}] : [] }; }`,
      );
      const u = await s.req({ method: 'POST', url: '/users', payload: { Email: 'lin@eng.example' } });
      const uid = String(u.headers['x-id']);
      const m = await s.store.get(Membership, `${gid}.${uid}`);
      expect(['approved', 'active']).toContain(m?.doc.State);
      // Moving to another domain: the script no longer lists the group, the membership it made goes.
      const cur = await s.req({ url: `/users/${uid}` });
      const put = await s.req({
        method: 'PUT',
        url: `/users/${uid}`,
        headers: { 'if-match': String(cur.headers.etag) },
        payload: { ...(cur.json() as Record<string, unknown>), Email: 'lin@sales.example' },
      });
      expect(put.statusCode, put.body).toBe(204);
      expect(await s.store.get(Membership, `${gid}.${uid}`)).toBeUndefined();
      await disable(s, id);
    });

    it('account and merge suggestions: scripts refine the lists; a failing script leaves them unchanged', async () => {
      const ctx = ctxOf(s);
      const suggestions = [
        { Kind: 'create', System: 'unix', Name: 'ada' },
        { Kind: 'create', System: 'windows', Name: 'ADA' },
      ];
      const user = { ID: s.adminId, Email: 'admin@example.com' };
      expect(await refineAccountSuggestions(ctx, user, suggestions)).toEqual(suggestions);
      const a = await addScript(
        s,
        'account-suggestions',
        'function hook(i) { return { Suggestions: i.Suggestions.filter((x) => x.System === "unix") }; }',
      );
      expect(await refineAccountSuggestions(ctx, user, suggestions)).toEqual([suggestions[0]]);
      await disable(s, a);
      const bad = await addScript(
        s,
        'account-suggestions',
        'function hook(i) { return { Suggestions: "nope" }; }',
      );
      expect(await refineAccountSuggestions(ctx, user, suggestions)).toEqual(suggestions);
      await disable(s, bad);

      const merges = [
        { UserID: 'a', OtherUserID: 'b', Score: 0.9 },
        { UserID: 'c', OtherUserID: 'd', Score: 0.2 },
      ];
      const m = await addScript(
        s,
        'merge-suggestions',
        'function hook(i) { return { Suggestions: i.Suggestions.filter((x) => x.Score > 0.5) }; }',
      );
      expect(await refineMergeSuggestions(ctx, merges)).toEqual([merges[0]]);
      await disable(s, m);
      const loop = await addScript(s, 'merge-suggestions', 'function hook() { for (;;) {} }');
      expect(await refineMergeSuggestions(ctx, merges)).toEqual(merges);
      await disable(s, loop);
    });
  });
});

function blankLog() {
  return {
    ScriptID: '',
    ScriptName: '',
    Hook: '',
    Test: '',
    Time: new Date().toISOString(),
    Input: '{}',
    Console: [],
    Result: '',
    Error: '',
    DurationMs: 0,
    LimitsHit: [],
    Applied: '',
    Passed: false,
    Expected: '',
  };
}

async function disable(s: TestService, id: string) {
  const cur = await s.req({ url: `/scripts/${id}` });
  const r = await s.req({
    method: 'PUT',
    url: `/scripts/${id}`,
    headers: { 'if-match': String(cur.headers.etag) },
    payload: { ...(cur.json() as Record<string, unknown>), Enabled: false },
  });
  expect(r.statusCode).toBe(204);
}
