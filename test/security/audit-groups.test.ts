/**
 * Second-afternoon audit of the group pages and the group lifecycle: the same classes of bug as
 * the named findings, in places nobody named.
 *
 * 1. Open redirect (finding 7's class): the access-request pages follow `next` after a join or an
 *    activation. They had a return-path check of their own that accepted what the project's one
 *    check (src/core/returnurl.ts) refuses: "/%2f%2fevil.example", "/%5cevil.example" and
 *    "/%09/evil.example" (one decoding away from "//evil.example"), raw non-ASCII and DEL.
 * 2. Privilege (finding 3's class): approver power that comes from the active membership of a
 *    group's ApproverGroup ignored that group's IntegrityLevel, so a password-only session or a
 *    plain user key decided requests although the membership it rests on does not count for it
 *    in any access check.
 * 3. Unbounded work (finding 8's class, every wait and size has a bound): GET /signin/approvals,
 *    which any user may load, read the approver group and a membership for every group of the
 *    tenant (two reads per group, per page load). It now reads the caller's memberships once.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLocalReturnPath } from '../../src/core/returnurl.js';
import { makeUser, signedIn } from '../auth/client.js';
import { create, op, person } from '../groups/fixture.js';
import { backends, startTestService, type TestService } from '../helpers.js';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** Pieces of a `next` value an attacker strings together after the leading "/". */
const piece = fc.constantFrom(
  '%2f',
  '%2F',
  '%5c',
  '%5C',
  '%09',
  '%0a',
  '%0d',
  '%00',
  '%25',
  '%252f',
  '%2e',
  '.',
  '..',
  '/',
  'evil.example',
  '@',
  ':',
  '\u007f',
  '\u00a0',
  '\u00e9',
  '\u3002',
  '\u2028',
  '\ufeff',
  '?x=//evil.example',
  '#//evil.example',
  'docs',
  '%20',
);
const nextValue = fc.array(piece, { minLength: 1, maxLength: 5 }).map((ps) => `/${ps.join('')}`);

describe.each(backends())('group pages and lifecycle, second afternoon, on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  describe('next after a join or an activation: the one return-path check', () => {
    let group: string;
    let key: string;
    beforeAll(async () => {
      group = await create(s, 'groups', { Name: 'open' });
      const u = await person(s, 'Mallory');
      key = u.key;
      expect((await op(s, 'add', group, u.id)).statusCode).toBe(201);
    });

    /** POSTs the form an active member posts; the Location the page answers. */
    const activate = async (next: string) => {
      const res = await s.req({
        method: 'POST',
        url: `/signin/groups/${group}`,
        key,
        headers: FORM,
        payload: new URLSearchParams({ action: 'activate', next }).toString(),
      });
      expect(res.statusCode, `${JSON.stringify(next)}: ${res.body}`).toBe(303);
      return String(res.headers.location);
    };

    it('a local next is followed exactly when the shared check accepts it (generated)', async () => {
      await fc.assert(
        fc.asyncProperty(nextValue, async (next) => {
          const location = await activate(next);
          const followed = location === next;
          expect(followed, JSON.stringify(next)).toBe(isLocalReturnPath(next));
        }),
        { numRuns: 150 },
      );
    });

    it('the values one decoding away from another origin stay on the page; plain paths are followed', async () => {
      for (const next of [
        '/%2f%2fevil.example',
        '/%5cevil.example',
        '/%09/evil.example',
        '/%2F/evil.example',
      ])
        expect(await activate(next), next).toBe(`/signin/groups/${group}?next=${encodeURIComponent(next)}`);
      for (const next of ['/app/after?x=1', '/docs/my%20file']) expect(await activate(next), next).toBe(next);
    });

    it('the Continue link of the page is held to the same check', async () => {
      const res = await s.req({
        url: `/signin/groups/${group}?next=${encodeURIComponent('/%2f%2fevil.example')}`,
        key,
      });
      expect(res.statusCode).toBe(200);
      expect(res.body).not.toContain('id="continue"');
      expect(res.body).toContain('not on this service');
    });
  });

  describe('approver power from an ApproverGroup counts only at that group level', () => {
    let approvers: string;
    let guarded: string;
    let boss: { id: string; key: string };
    beforeAll(async () => {
      approvers = await create(s, 'groups', { Name: 'approvers', IntegrityLevel: 3 });
      guarded = await create(s, 'groups', {
        Name: 'production',
        RequiresApproval: true,
        ApproverGroup: approvers,
      });
      boss = await person(s, 'Boss');
      expect((await op(s, 'add', approvers, boss.id)).statusCode).toBe(201);
    });

    it('a user key (no integrity level) of an ApproverGroup member approves nobody', async () => {
      const friend = await person(s, 'Friend');
      expect((await op(s, 'add', guarded, friend.id, { key: friend.key })).statusCode).toBe(201);
      for (const action of ['approve', 'add', 'reject', 'remove'] as const) {
        const res = await op(s, action, guarded, friend.id, { key: boss.key });
        expect(res.statusCode, `${action}: ${res.body}`).toBe(403);
      }
      const m = await s.req({ url: `/groups/${guarded}/members/${friend.id}` });
      expect(m.json().State).toBe('requested');
      // The same through the approvals page.
      const page = await s.req({
        method: 'POST',
        url: '/signin/approvals',
        key: boss.key,
        headers: FORM,
        payload: new URLSearchParams({ group: guarded, user: friend.id, action: 'approve' }).toString(),
      });
      expect(page.statusCode).toBe(403);
      const list = await s.req({ url: '/signin/approvals', key: boss.key });
      expect(list.body).not.toContain(`data-user="${friend.id}"`);
    });

    it('a password-only session (level 2) of a member of a level-3 ApproverGroup approves nobody', async () => {
      const email = 'approver-l1@example.com';
      const password = 'pw-approver-l1-long-enough';
      const id = await makeUser(s, { email, password });
      expect((await op(s, 'add', approvers, id)).statusCode).toBe(201);
      const b = await signedIn(s, email, password);
      const asker = await person(s, 'Asker1');
      expect((await op(s, 'add', guarded, asker.id, { key: asker.key })).statusCode).toBe(201);
      const list = await b.req({ url: '/signin/approvals' });
      expect(list.statusCode).toBe(200);
      expect(list.body).not.toContain(`data-user="${asker.id}"`);
      const post = await b.post('/signin/approvals', { group: guarded, user: asker.id, action: 'approve' });
      expect(post.statusCode).toBe(403);
      const m = await s.req({ url: `/groups/${guarded}/members/${asker.id}` });
      expect(m.json().State).toBe('requested');
    });

    it('members it may not approve: it may not list them either', async () => {
      const res = await s.req({ url: `/groups/${guarded}/members`, key: boss.key });
      expect(res.statusCode).toBe(403);
    });

    it("the approvals page costs reads by the caller's memberships, not by every group of the tenant", async () => {
      const keeper = await create(s, 'groups', { Name: 'keepers' });
      for (let i = 0; i < 60; i++)
        await create(s, 'groups', { Name: `many-${i}`, RequiresApproval: true, ApproverGroup: keeper });
      const visitor = await person(s, 'Visitor');
      const get = s.store.get.bind(s.store);
      let reads = 0;
      s.store.get = (async (...args: Parameters<typeof get>) => {
        reads++;
        return get(...args);
      }) as typeof s.store.get;
      try {
        const res = await s.req({ url: '/signin/approvals', key: visitor.key });
        expect(res.statusCode).toBe(200);
        expect(res.body).toContain('id="empty"');
      } finally {
        s.store.get = get;
      }
      expect(reads).toBeLessThan(20);
    });

    it('an ApproverGroup without a level, and the Approvers list, still make approvers', async () => {
      const open = await create(s, 'groups', { Name: 'approvers0' });
      const g = await create(s, 'groups', { Name: 'stage', RequiresApproval: true, ApproverGroup: open });
      const named = await person(s, 'Named');
      const h = await create(s, 'groups', { Name: 'stage2', RequiresApproval: true, Approvers: [named.id] });
      const member = await person(s, 'Member');
      expect((await op(s, 'add', open, member.id)).statusCode).toBe(201);
      const asker = await person(s, 'Asker');
      expect((await op(s, 'add', g, asker.id, { key: asker.key })).statusCode).toBe(201);
      expect((await op(s, 'add', h, asker.id, { key: asker.key })).statusCode).toBe(201);
      expect((await op(s, 'approve', g, asker.id, { key: member.key })).statusCode).toBe(200);
      expect((await op(s, 'approve', h, asker.id, { key: named.key })).statusCode).toBe(200);
    });
  });
});
