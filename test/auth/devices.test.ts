import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceTag, rememberDevice, trustedTag } from '../../src/auth/factors/devices.js';
import { authDb } from '../../src/auth/session/db.js';
import { sweepEnded } from '../../src/auth/session/rows.js';
import { TRUSTED_DEVICES } from '../../src/auth/throttle.js';
import { User } from '../../src/objects/user.js';
import { LIST_INDEXES } from '../../src/store/listindexes.js';
import { migrate } from '../../src/store/migrations.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { account, signIn } from '../kit/index.js';

/**
 * Trusted devices (src/auth/factors/devices.ts) live in a table of their own: a sign-in on a new
 * device must not rewrite the User (its ETag, ModifyTime, a change every subscriber is sent).
 */
describe.each(backends())('trusted devices on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  const userOf = async (id: string) => {
    const r = await s.app.inject({ url: `/users/${id}`, headers: { authorization: `Bearer ${s.adminKey}` } });
    expect(r.statusCode).toBe(200);
    return { etag: r.headers.etag, modified: (JSON.parse(r.body) as { ModifyTime: string }).ModifyTime };
  };
  const changesOf = async (id: string) =>
    Number(
      (
        await sql<{
          n: number | string;
        }>`SELECT count(*) AS n FROM changes WHERE type = 'User' AND id = ${id}`.execute(s.db.kysely)
      ).rows[0]?.n,
    );
  const devicesOf = (id: string) =>
    authDb(s).selectFrom('trusted_devices').selectAll().where('user_id', '=', id).execute();
  /** Sets back the last use of every device of a user. */
  const lastUsedAt = (id: string, at: number) =>
    authDb(s).updateTable('trusted_devices').set({ last_used: at }).where('user_id', '=', id).execute();

  it('a sign-in on a new device records it without changing the User or its change log', async () => {
    const a = await account(s, { tag: 'newdevice' });
    const before = await userOf(a.id);
    const logged = await changesOf(a.id);
    const b = await signIn(s, a, { password: true });
    expect(await userOf(a.id)).toEqual(before);
    expect(await changesOf(a.id)).toBe(logged);
    const rows = await devicesOf(a.id);
    expect(rows.map((r) => r.tag)).toEqual([deviceTag(b.device as string)]);
    // The tag, never the cookie value itself.
    expect(JSON.stringify(rows)).not.toContain(b.device as string);
    expect(await trustedTag(s, a.id, b.device)).toBe(deviceTag(b.device as string));
  });

  it('a device is trusted for the user who signed in on it, not for another user it is shown to', async () => {
    const a = await account(s, { tag: 'owner' });
    const other = await account(s, { tag: 'other' });
    const b = await signIn(s, a, { password: true });
    expect(await trustedTag(s, a.id, b.device)).toBeDefined();
    expect(await trustedTag(s, other.id, b.device)).toBeUndefined();
    expect(await trustedTag(s, a.id, undefined)).toBeUndefined();
    expect(await trustedTag(s, a.id, `${b.device}x`)).toBeUndefined();
  });

  it('signing in again on a known device writes nothing until the refresh interval has passed', async () => {
    const a = await account(s, { tag: 'again' });
    const b = await signIn(s, a, { password: true });
    const [first] = await devicesOf(a.id);
    // Set back to just inside the refresh interval: a sign-in now leaves it as it is.
    const inside = Date.now() - TRUSTED_DEVICES.refreshMs + 60_000;
    await lastUsedAt(a.id, inside);
    await signIn(s, a, { password: true }, { browser: b });
    expect((await devicesOf(a.id)).map((r) => Number(r.last_used))).toEqual([inside]);
    // Past it, the time is written again.
    const past = Date.now() - TRUSTED_DEVICES.refreshMs - 60_000;
    await lastUsedAt(a.id, past);
    await signIn(s, a, { password: true }, { browser: b });
    const [now] = await devicesOf(a.id);
    expect(now?.tag).toBe(first?.tag);
    expect(Number(now?.last_used)).toBeGreaterThan(Date.now() - 60_000);
  });

  it("a device unused for longer than the forget interval is untrusted, and forgotten at the user's next record", async () => {
    const a = await account(s, { tag: 'forget' });
    const old = await signIn(s, a, { password: true });
    const gone = Date.now() - TRUSTED_DEVICES.forgetMs - 1000;
    await lastUsedAt(a.id, gone);
    expect(await trustedTag(s, a.id, old.device)).toBeUndefined();
    await signIn(s, a, { password: true });
    expect((await devicesOf(a.id)).map((r) => r.tag)).not.toContain(deviceTag(old.device as string));
  });

  it("the sweep of ended sessions forgets every user's devices unused for the forget interval", async () => {
    const a = await account(s, { tag: 'sweep' });
    await signIn(s, a, { password: true });
    await lastUsedAt(a.id, Date.now() - TRUSTED_DEVICES.forgetMs - 1000);
    const recent = await account(s, { tag: 'sweep-recent' });
    const kept = await signIn(s, recent, { password: true });
    await sweepEnded(s, 3600_000);
    expect(await devicesOf(a.id)).toEqual([]);
    expect((await devicesOf(recent.id)).map((r) => r.tag)).toEqual([deviceTag(kept.device as string)]);
  });

  it(`a user keeps the ${TRUSTED_DEVICES.max} most recently used devices; other users' are untouched`, async () => {
    const a = await account(s, { tag: 'many' });
    const bystander = await account(s, { tag: 'bystander' });
    const kept = await signIn(s, bystander, { password: true });
    const devices: string[] = [];
    for (let i = 0; i <= TRUSTED_DEVICES.max; i++) {
      const id = `device-${backend}-${i}-${'x'.repeat(8)}`;
      devices.push(id);
      await rememberDevice(s, a.id, id);
      // Distinct times, in order: the first is the least recently used.
      await authDb(s)
        .updateTable('trusted_devices')
        .set({ last_used: Date.now() - 60_000 * (TRUSTED_DEVICES.max - i + 1) })
        .where('user_id', '=', a.id)
        .where('tag', '=', deviceTag(id))
        .execute();
    }
    const rows = await devicesOf(a.id);
    expect(rows).toHaveLength(TRUSTED_DEVICES.max);
    expect(rows.map((r) => r.tag).sort()).toEqual(devices.slice(1).map(deviceTag).sort());
    expect(await trustedTag(s, a.id, devices[0])).toBeUndefined();
    expect(await trustedTag(s, bystander.id, kept.device)).toBeDefined();
  });

  it('migration 0011 moves devices recorded in the hidden state into the table', async () => {
    const a = await account(s, { tag: 'migrated' });
    const recent = Date.now() - 1000;
    const legacy = { TrustedDevices: { [deviceTag('legacy-device-0001')]: recent, bad: 'x' }, Keep: 1 };
    await sql`UPDATE objects SET secret = ${JSON.stringify(legacy)} WHERE type = 'User' AND id = ${a.id}`.execute(
      s.db.kysely,
    );
    // Undo 0011 and the migrations after it, then apply them again, as a database of the
    // version before would be.
    await sql`DROP TABLE trusted_devices`.execute(s.db.kysely);
    for (const { name } of LIST_INDEXES) await sql`DROP INDEX ${sql.raw(name)}`.execute(s.db.kysely);
    await sql`DELETE FROM kysely_migration WHERE name >= '0011'`.execute(s.db.kysely);
    expect(await migrate(s.db)).toEqual(['0011_trusted_devices', '0012_list_indexes']);
    expect(await trustedTag(s, a.id, 'legacy-device-0001')).toBe(deviceTag('legacy-device-0001'));
    expect((await devicesOf(a.id)).map((r) => [r.tag, Number(r.last_used)])).toEqual([
      [deviceTag('legacy-device-0001'), recent],
    ]);
    expect(await s.store.getSecret(User, a.id)).toEqual({ Keep: 1 });
  });
});
