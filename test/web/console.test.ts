import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type Account, account } from '../kit/index.js';
import {
  HAVE_CHROMIUM,
  type Harness,
  newTab,
  shot,
  shotDark,
  signInTab,
  startConsole,
  stepUp,
  type Tab,
  unexpected,
} from './console-kit.js';

// biome-ignore lint/suspicious/noExplicitAny: a JSON body as the API returns it
type Doc = Record<string, any>;

/*
 * The admin console in headless Chromium (docs/console.md): the step-up in place as it opens,
 * users listed, searched and created, a membership added, lists following the event stream,
 * edits with If-Match and a 412 that shows what changed, confirmations, the audit view; every
 * view checked with axe-core in light and dark and photographed; no page or console error.
 */
describe.skipIf(!HAVE_CHROMIUM)('admin console in headless Chromium', () => {
  let h: Harness;
  let admin: Account;
  let tab: Tab;
  const ada = 'ada.lovelace@example.com';
  let adaId = '';

  beforeAll(async () => {
    h = await startConsole();
    admin = await account(h.s, { admin: true, totp: true, tag: 'admin' });
    for (const [email, name] of [
      [ada, 'Ada Lovelace'],
      ['grace.hopper@example.com', 'Grace Hopper'],
      ['alan.turing@example.com', 'Alan Turing'],
    ] as const) {
      const r = await h.s.req({
        method: 'POST',
        url: '/users',
        payload: { Email: email, Name: { FullName: name }, Active: true },
      });
      expect(r.statusCode, r.body).toBe(201);
      if (email === ada) adaId = String(r.headers['x-id']);
    }
    tab = await newTab(h);
    // A password only: below IntegrityAdmin (3), so the console must ask for the step-up.
    await signInTab(h, tab, admin, { password: true });
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });

  it('asks for the step-up in place as it opens, then shows the users', async () => {
    const { page } = tab;
    const res = await page.goto(`${h.base}/console`);
    expect(res?.status()).toBe(200);
    const csp = res?.headers()['content-security-policy'] ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    await page.getByLabel('Code', { exact: true }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/users');
    await shot(page, 'console-stepup');
    // A wrong code is refused in place.
    await page.getByLabel('Code', { exact: true }).fill('000000');
    await page.getByRole('button', { name: 'Confirm', exact: true }).click();
    await page.getByText('That is not correct').waitFor();
    await stepUp(tab, admin, 1);
    await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/users');
    await page.getByRole('link', { name: ada }).waitFor();
    await page.getByRole('link', { name: 'grace.hopper@example.com' }).waitFor();
    expect(unexpected(tab.errors, /status of 403/)).toEqual([]);
  }, 60_000);

  it('searches the users', async () => {
    const { page } = tab;
    await page.getByRole('searchbox', { name: 'Search' }).fill('hopper');
    await page.getByRole('link', { name: 'grace.hopper@example.com' }).waitFor();
    await expect.poll(() => page.getByRole('link', { name: ada }).count()).toBe(0);
    await page.getByRole('searchbox', { name: 'Search' }).fill('');
    await page.getByRole('link', { name: ada }).waitFor();
    await shot(page, 'console-users');
    await shotDark(page, 'console-users-dark');
  }, 60_000);

  it('creates a user from the "New user" form', async () => {
    const { page } = tab;
    await page.getByRole('button', { name: 'New user' }).click();
    await page.getByLabel('E-mail').fill('katherine.johnson@example.com');
    await page.getByLabel('Full name').fill('Katherine Johnson');
    await shot(page, 'console-new-user', false);
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByRole('link', { name: 'katherine.johnson@example.com' }).waitFor();
    const list = await h.s.req({
      method: 'GET',
      url: '/users?filter=Email%20%3D%20%22katherine.johnson%40example.com%22',
    });
    expect(list.body).toContain('Katherine Johnson');
  }, 60_000);

  it('follows the event stream: a user created elsewhere appears without a reload', async () => {
    const { page } = tab;
    const r = await h.s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: 'dorothy.vaughan@example.com' },
    });
    expect(r.statusCode).toBe(201);
    await page.getByRole('link', { name: 'dorothy.vaughan@example.com' }).waitFor({ timeout: 10_000 });
    await h.s.req({
      method: 'DELETE',
      url: `/users/${r.headers['x-id']}`,
      headers: { 'if-match': String(r.headers.etag) },
    });
    await expect
      .poll(() => page.getByRole('link', { name: 'dorothy.vaughan@example.com' }).count(), {
        timeout: 10_000,
      })
      .toBe(0);
  }, 60_000);

  it('adds a member to a group with "Add member", and the list follows changes made elsewhere', async () => {
    const { page } = tab;
    const g = await h.s.req({
      method: 'POST',
      url: '/groups',
      payload: { Name: 'engineering', Description: 'Builders' },
    });
    const gid = String(g.headers['x-id']);
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Groups' }).click();
    await page.getByRole('heading', { name: 'Groups', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'engineering' }).click();
    await page.getByRole('heading', { name: 'engineering', level: 1 }).waitFor();
    await page.getByLabel('E-mail').fill(ada);
    await page.getByRole('button', { name: 'Add member' }).click();
    await page.getByRole('cell', { name: ada }).waitFor();
    const m = await h.s.req({ method: 'GET', url: `/groups/${gid}/members/${adaId}` });
    expect(m.statusCode).toBe(200);
    expect(m.json().State).toBe('active');
    // A rejection made elsewhere appears; here it is taken back (unreject), then approved.
    const users = await h.s.req({
      method: 'GET',
      url: '/users?filter=Email%20%3D%20%22grace.hopper%40example.com%22',
    });
    const grace = JSON.parse(users.body.split('\n')[0] as string).ID as string;
    await h.s.req({ method: 'POST', url: `/groups/${gid}/members/${grace}/reject`, payload: {} });
    await page.getByRole('button', { name: 'Unreject' }).waitFor({ timeout: 10_000 });
    await shot(page, 'console-group');
    await page.getByRole('button', { name: 'Unreject' }).click();
    const state = async () =>
      (await h.s.req({ method: 'GET', url: `/groups/${gid}/members/${grace}` })).json().State;
    await expect.poll(state).toBe('requested');
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(state).toBe('active');
  }, 60_000);

  it('removes a member only after a confirmation that names who and where', async () => {
    const { page } = tab;
    await page
      .getByRole('row', { name: new RegExp(ada) })
      .getByRole('button', { name: 'Remove' })
      .click();
    const dialog = page.getByRole('dialog', { name: 'Remove member' });
    await dialog.getByText(`${ada} is no longer a member of engineering.`).waitFor();
    await shot(page, 'console-confirm', false);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('cell', { name: ada }).waitFor();
    await page
      .getByRole('row', { name: new RegExp(ada) })
      .getByRole('button', { name: 'Remove' })
      .click();
    await page.getByRole('button', { name: `Remove ${ada} from engineering` }).click();
    await expect.poll(() => page.getByRole('cell', { name: ada }).count(), { timeout: 10_000 }).toBe(0);
  }, 60_000);

  it('edits with the If-Match of what the administrator saw; a 412 shows what changed meanwhile', async () => {
    const { page } = tab;
    await page.goto(`${h.base}/console/users/${adaId}`);
    await page.getByRole('heading', { name: ada, level: 1 }).waitFor();
    await page.getByLabel('Full name').fill('Augusta Ada King');
    // Meanwhile, someone else renames her.
    const cur = await h.s.req({ method: 'GET', url: `/users/${adaId}` });
    const put = await h.s.req({
      method: 'PUT',
      url: `/users/${adaId}`,
      headers: { 'if-match': String(cur.headers.etag) },
      payload: {
        ...(cur.json() as Doc),
        Name: { ...(cur.json() as Doc).Name, FullName: 'Ada, Countess of Lovelace' },
      },
    });
    expect(put.statusCode).toBe(204);
    await page.getByText('Changed elsewhere since you opened it').waitFor({ timeout: 10_000 });
    await page.getByRole('button', { name: 'Save changes' }).click();
    const conflict = page.getByRole('region', { name: 'Changed meanwhile' });
    await conflict.getByRole('cell', { name: 'Ada, Countess of Lovelace' }).waitFor();
    await conflict.getByRole('cell', { name: 'Ada Lovelace', exact: true }).waitFor();
    await shot(page, 'console-conflict');
    expect((await h.s.req({ method: 'GET', url: `/users/${adaId}` })).json().Name.FullName).toBe(
      'Ada, Countess of Lovelace',
    );
    await page.getByRole('button', { name: 'Apply my edits to the current version' }).click();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Saved.').waitFor();
    expect((await h.s.req({ method: 'GET', url: `/users/${adaId}` })).json().Name.FullName).toBe(
      'Augusta Ada King',
    );
    expect(unexpected(tab.errors, /status of 403/, /status of 412/)).toEqual([]);
  }, 60_000);

  it('disables a user after a confirmation naming them', async () => {
    const { page } = tab;
    await page.getByRole('button', { name: 'Disable user…' }).click();
    await page.getByRole('dialog', { name: 'Disable user' }).waitFor();
    await page.getByRole('button', { name: `Disable ${ada}` }).click();
    await page.getByText(`${ada} is disabled.`).waitFor();
    expect((await h.s.req({ method: 'GET', url: `/users/${adaId}` })).json().Disabled).toBe(true);
    await shot(page, 'console-user');
  }, 60_000);

  it("revokes a user's session and removes a factor, each after a confirmation", async () => {
    const { page } = tab;
    const grace = await account(h.s, { tag: 'grace' });
    const theirs = await newTab(h);
    await signInTab(h, theirs, grace, { password: true });
    expect((await theirs.context.request.get(`${h.base}/users/me`)).status()).toBe(200);
    await page.goto(`${h.base}/console/users/${grace.id}`);
    await page.getByRole('heading', { name: grace.email, level: 1 }).waitFor();
    const sessions = page.getByRole('region', { name: 'Sessions' });
    await sessions.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: `Revoke this session of ${grace.email}` }).click();
    await sessions.getByText('No live session.').waitFor();
    expect((await theirs.context.request.get(`${h.base}/users/me`)).status()).toBe(401);
    await page.getByRole('button', { name: 'Remove password' }).click();
    await page.getByRole('button', { name: `Remove password of ${grace.email}` }).click();
    await page.getByText('Removed password.').waitFor();
    expect((await h.s.req({ method: 'GET', url: `/users/${grace.id}` })).json().HavePassword).toBe(false);
    await theirs.context.close();
  }, 60_000);

  it('merges the users the merge suggestions name, after a confirmation', async () => {
    const { page } = tab;
    const dup = await h.s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: 'g.hopper@example.com', OtherEmails: ['grace.hopper@example.com'] },
    });
    expect(dup.statusCode, dup.body).toBe(201);
    await page.goto(`${h.base}/console/users`);
    const suggestions = page.getByRole('region', { name: 'Merge suggestions' });
    await suggestions.getByText('same verified e-mail').waitFor();
    await suggestions.getByRole('button', { name: 'Merge…' }).first().click();
    await page
      .getByRole('dialog', { name: 'Merge users' })
      .getByRole('button', { name: /^Merge / })
      .click();
    await page.getByText(/was merged into/).waitFor();
    // One of the two now points at the other.
    const dupDoc = (await h.s.req({ method: 'GET', url: `/users/${dup.headers['x-id']}` })).json();
    const merged = await h.s.req({ method: 'GET', url: '/users?filter=MergedInto%20%3E%20%22%22' });
    const into = JSON.parse(merged.body.trim()).Item.MergedInto as string;
    expect([dupDoc.ID, dupDoc.MergedInto]).toContain(into);
  }, 60_000);

  it('shows the audit trail, filterable, following new entries', async () => {
    const { page } = tab;
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Audit' }).click();
    await page.getByRole('heading', { name: 'Audit trail', level: 1 }).waitFor();
    await page.getByText(`disabled ${ada}`).first().waitFor();
    // A refusal made elsewhere appears, and the "Only refusals" filter keeps it.
    await h.s.req({ method: 'POST', url: '/users', payload: { Email: ada.toUpperCase() } });
    await page.getByLabel('Only refusals').check();
    await page.getByRole('cell', { name: '409' }).first().waitFor({ timeout: 10_000 });
    await expect.poll(() => page.getByRole('cell', { name: '204' }).count()).toBe(0);
    await page.getByLabel('Only refusals').uncheck();
    await shot(page, 'console-audit');
  }, 60_000);

  it('names the object a create made ("created user …"): needs ObjectID on creates in the audit trail', async () => {
    const { page } = tab;
    const r = await h.s.req({
      method: 'POST',
      url: '/users',
      payload: { Email: 'mary.jackson@example.com' },
    });
    expect(r.statusCode).toBe(201);
    await page.getByText('created user mary.jackson@example.com').first().waitFor({ timeout: 10_000 });
  }, 30_000);

  it('made no page error and no console error beyond the refusals provoked on purpose', () => {
    expect(unexpected(tab.errors, /status of 403/, /status of 412/)).toEqual([]);
  });
});
