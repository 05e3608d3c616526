import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, startTestService, type TestService } from '../helpers.js';
import { addScript } from '../scripts/kit.js';
import { addMember, lines, world } from './fixture.js';

/*
 * The suggestion hooks of scripts (docs/scripts.md) wired into the directory's endpoints: a script
 * may drop, reorder and re-word suggestions, never add one or change what one does, since an
 * account suggestion can become a plan of account changes.
 */

const disable = async (s: TestService, id: string) => {
  const get = await s.req({ url: `/scripts/${id}` });
  await s.req({
    method: 'PUT',
    url: `/scripts/${id}`,
    payload: { ...(get.json() as object), Enabled: false },
    headers: { 'if-match': get.headers.etag as string },
  });
};

describe.each(backends())('suggestions refined by scripts on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  const suggest = async (userId: string, payload: Record<string, unknown> = {}) => {
    const r = await s.req({ method: 'POST', url: `/users/${userId}/accounts/suggest`, payload });
    expect(r.statusCode, r.body).toBeLessThan(300);
    return r.json() as { Changes: Record<string, unknown>[]; PlanID?: string };
  };

  it('account suggestions: a script re-words and drops, and what it adds or alters is ignored, also in the plan', async () => {
    const w = await world(s);
    await addMember(s, w.groupId, w.userId);
    const plain = (await suggest(w.userId)).Changes;
    expect(plain.length).toBe(1);
    const id = await addScript(
      s,
      'account-suggestions',
      `function hook(i) {
         const mine = i.Suggestions.map((x) => ({ ...x, Reason: "needed for payroll" }));
         const altered = i.Suggestions.map((x) => ({ ...x, AppID: "someotherapp", Reason: "sneaky" }));
         const added = { Action: "create", UserID: "${s.adminId}", AppID: "${w.appId}", AccountID: "", AccountName: "root", Reason: "injected" };
         return { Suggestions: [...mine, ...altered, added] };
       }`,
    );
    try {
      const refined = (await suggest(w.userId)).Changes;
      expect(refined).toEqual([{ ...plain[0], Reason: 'needed for payroll' }]);
      // Turned into a plan: the plan holds exactly the known change.
      const planned = await suggest(w.userId, { Plan: { Name: 'refined' } });
      expect(planned.Changes).toEqual(refined);
      const changes = lines(
        (await s.req({ url: `/accountchanges?filter=PlanID=${JSON.stringify(planned.PlanID)}` })).body,
      );
      expect(changes.map((l) => (l.Item as Record<string, unknown>).AccountName)).toEqual([
        plain[0]?.AccountName,
      ]);
      expect(changes.map((l) => (l.Item as Record<string, unknown>).UserID)).toEqual([w.userId]);
    } finally {
      await disable(s, id);
    }
    const other = await world(s);
    await addMember(s, other.groupId, other.userId);
    const drop = await addScript(
      s,
      'account-suggestions',
      'function hook(i) { return { Suggestions: [] }; }',
    );
    try {
      expect((await suggest(other.userId)).Changes).toEqual([]);
    } finally {
      await disable(s, drop);
    }
  });

  it('merge suggestions: a script may annotate and drop, not invent a pair', async () => {
    const tag = Date.now().toString(36);
    for (const n of [1, 2]) {
      const r = await s.req({
        method: 'POST',
        url: '/users',
        payload: { Name: { FullName: `Twin ${tag}` }, UserName: `twin${tag}${n}` },
      });
      expect(r.statusCode, r.body).toBe(201);
    }
    const get = async () => lines((await s.req({ url: '/users/merge' })).body);
    const before = await get();
    expect(before.length).toBeGreaterThanOrEqual(1);
    const id = await addScript(
      s,
      'merge-suggestions',
      `function hook(i) {
         return { Suggestions: [
           ...i.Suggestions.map((x) => ({ ...x, Reason: "HR says: same person" })),
           { UserIDs: ["${s.adminId}", "nobody"], Reason: "same verified e-mail", Detail: "x" },
         ] };
       }`,
    );
    try {
      const after = await get();
      expect(after.map((l) => ({ ...l, Note: undefined }))).toEqual(
        before.map((l) => ({ ...l, Note: undefined })),
      );
      for (const l of after) expect(l.Note).toBe('HR says: same person');
    } finally {
      await disable(s, id);
    }
  });
});
