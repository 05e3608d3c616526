import type { IncomingMessage } from 'node:http';
import { type AddressInfo, connect as connectTcp } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { takeSnapshot } from '../../src/events/snapshot.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { EventClient } from './client.js';

describe.each(backends())('GET /events on %s', (backend) => {
  let s: TestService;
  let base: string;
  const open: EventClient[] = [];
  const connect = async (key: string | undefined = undefined, opts = {}) => {
    const c = await EventClient.open(base, key ?? s.adminKey, opts);
    open.push(c);
    return c;
  };

  /** Creates an object through the API; returns its ID and ETag. */
  const create = async (path: string, body: Record<string, unknown>) => {
    const res = await s.req({ method: 'POST', url: `/${path}`, payload: body });
    expect(res.statusCode).toBe(201);
    return { id: res.headers['x-id'] as string, etag: res.headers.etag as string };
  };
  const update = async (path: string, id: string, body: Record<string, unknown>) => {
    const get = await s.req({ method: 'GET', url: `/${path}/${id}` });
    const res = await s.req({
      method: 'PUT',
      url: `/${path}/${id}`,
      payload: { ...(get.json() as Record<string, unknown>), ...body },
      headers: { 'if-match': get.headers.etag as string },
    });
    expect(res.statusCode).toBe(204);
  };
  /** The APIKey ID of a plaintext key (found by its Prefix). */
  const keyIdOf = async (key: string) => {
    const list = await s.req({ method: 'GET', url: '/apikeys' });
    const found = list.body
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { ID: string; Item: { Prefix: string } })
      .filter((k) => key.startsWith(k.Item.Prefix));
    expect(found).toHaveLength(1);
    return found[0]?.ID as string;
  };
  const remove = async (path: string, id: string) => {
    const get = await s.req({ method: 'GET', url: `/${path}/${id}` });
    const res = await s.req({
      method: 'DELETE',
      url: `/${path}/${id}`,
      headers: { 'if-match': get.headers.etag as string },
    });
    expect(res.statusCode).toBe(204);
  };

  beforeAll(async () => {
    s = await startTestService(backend);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const c of open) c.ws.terminate();
    await s?.close();
  });

  it('refuses the upgrade with 401 in the JSON error shape without credentials or with a bad key', async () => {
    const err = (await EventClient.open(base, undefined).catch((e) => e)) as {
      res: IncomingMessage;
      body: string;
    };
    expect(err.res.statusCode).toBe(401);
    // The server ends the refused socket itself: a raw client that never closes cannot keep it.
    // So does an upgrade attempt on any other path.
    const port = Number(new URL(base).port);
    for (const [path, status] of [
      ['/events', 401],
      ['/users', 401],
      ['/no-such-path', 404],
    ] as const) {
      const raw = connectTcp(port, '127.0.0.1');
      let text = '';
      raw.on('data', (d) => {
        text += d;
      });
      raw.write(
        `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      );
      await new Promise((r) => raw.once('end', r));
      expect(text.split('\r\n')[0]).toBe(
        `HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : 'Not Found'}`,
      );
      raw.destroy();
    }
    expect(err.res.headers['x-error-code']).toBe('Unauthenticated');
    expect(JSON.parse(err.body)).toMatchObject({ Status: 401, Code: 'Unauthenticated' });
    // With valid credentials, only /events becomes a websocket: any other path is answered as
    // plain HTTP (never 101) and its socket ended.
    const raw = connectTcp(port, '127.0.0.1');
    let text = '';
    raw.on('data', (d) => {
      text += d;
    });
    raw.write(
      `GET /users HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.adminKey}\r\nConnection: Upgrade\r\n` +
        'Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await new Promise((r) => raw.once('end', r));
    expect(text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    raw.destroy();
    const bad = (await EventClient.open(base, `gv${'x'.repeat(54)}`).catch((e) => e)) as {
      res: { statusCode: number };
    };
    expect(bad.res.statusCode).toBe(401);
  });

  it('answers a plain GET (no upgrade) with 426, after authentication', async () => {
    const res = await s.req({ method: 'GET', url: '/events' });
    expect(res.statusCode).toBe(426);
    expect(res.json()).toMatchObject({ Status: 426, Code: 'Upgrade Required' });
    const anon = await s.req({ method: 'GET', url: '/events', key: '' });
    expect(anon.statusCode).toBe(401);
  });

  it('accepts the key as access_token and streams snapshot, marker, then creates, updates and deletes in order', async () => {
    const a = await create('groups', { Name: 'snap-a' });
    const b = await create('groups', { Name: 'snap-b' });
    const c = await connect(s.adminKey, { query: true });
    c.send({ Kind: 'Group' });
    const snap = await c.caughtUp('Group');
    const ids = snap.map((f) => f.ID);
    expect(ids).toEqual(expect.arrayContaining([a.id, b.id]));
    for (const f of snap) expect(f.Item.ID).toBe(f.ID);
    expect(snap.find((f) => f.ID === a.id)?.Item.Name).toBe('snap-a');
    const marker = c.frames[c.markerIndex('Group')];
    expect(marker).toEqual({ ID: '', Item: {}, Kind: 'Group' });

    const n0 = c.frames.length;
    const g = await create('groups', { Name: 'live-1' });
    await update('groups', g.id, { Name: 'live-2' });
    await remove('groups', g.id);
    await remove('groups', a.id);
    const live = (await c.count(n0 + 4)).slice(n0);
    expect(live.map((f) => [f.ID, f.Item.Name])).toEqual([
      [g.id, 'live-1'],
      [g.id, 'live-2'],
      [g.id, undefined],
      [a.id, undefined],
    ]);
    expect(live[2]).toEqual({ ID: g.id, Item: {}, Kind: 'Group' });
    await new Promise((r) => setTimeout(r, 100));
    expect(c.frames.length).toBe(n0 + 4);
  });

  it('narrows a subscription to one object with ID, and holds several subscriptions on one connection', async () => {
    const one = await create('groups', { Name: 'narrow-1' });
    const other = await create('groups', { Name: 'narrow-2' });
    const c = await connect();
    c.send({ Kind: 'Group', ID: one.id });
    const snap = await c.caughtUp('Group');
    expect(snap.map((f) => f.ID)).toEqual([one.id]);
    c.send({ Kind: 'User' });
    const users = await c.caughtUp('User');
    expect(users.map((f) => f.ID)).toContain(s.adminId);
    const n0 = c.frames.length;
    await update('groups', other.id, { Name: 'narrow-2b' });
    await update('groups', one.id, { Name: 'narrow-1b' });
    const u = await create('users', {});
    const live = (await c.count(n0 + 2)).slice(n0);
    expect(live.map((f) => [f.Kind, f.ID])).toEqual([
      ['Group', one.id],
      ['User', u.id],
    ]);
    await new Promise((r) => setTimeout(r, 100));
    expect(c.frames.length).toBe(n0 + 2);
  });

  it('answers bad requests with error frames and keeps the connection open', async () => {
    const c = await connect();
    c.send('{not json');
    c.send({ ID: 'x' });
    c.send({ Kind: 'Nope' });
    c.send({ Kind: 'Group', Extra: 1 });
    c.send({ Kind: 'Group', ID: 7 });
    c.send([1]);
    c.send({ Kind: 'Auth' }); // an API key has no session
    c.ws.send(Buffer.from('{"Kind":"Group"}'), { binary: true });
    const frames = await c.count(8);
    expect(frames.map((f) => f.StatusCode)).toEqual([400, 400, 404, 400, 400, 400, 400, 400]);
    for (const f of frames) {
      expect(typeof f.StatusText).toBe('string');
      expect(f.Item).toEqual({});
    }
    expect(frames[2]).toMatchObject({ Kind: 'Nope', ID: '' });
    expect(frames[6]).toMatchObject({ Kind: 'Auth', StatusText: expect.stringMatching(/session/) });
    c.send({ Kind: 'Tenant' });
    const tenant = await c.caughtUp('Tenant');
    expect(tenant).toHaveLength(1);
    c.send({ Kind: 'Tenant' });
    await c.until((x) => x.frames.some((f) => f.StatusCode === 409));
    expect(c.closed).toBeUndefined();
  });

  it('applies scopes: 403 frame without read access, own-only filtering for user keys', async () => {
    const sync = await connect(await s.keyFor(['sync']));
    sync.send({ Kind: 'APIKey' });
    sync.send({ Kind: 'User' });
    await sync.until((c) => c.frames.length >= 2 && c.markerIndex('User') >= 0);
    expect(sync.frames[0]).toMatchObject({ Kind: 'APIKey', StatusCode: 403 });

    const me = await create('users', {});
    const other = await create('users', {});
    const userKey = await s.keyFor(['user'], me.id);
    const c = await connect(userKey);
    c.send({ Kind: 'User' });
    const users = await c.caughtUp('User');
    expect(users.map((f) => f.ID)).toEqual([me.id]);
    c.send({ Kind: 'Group', ID: 'nothing-here' });
    await c.caughtUp('Group');
    c.send({ Kind: 'APIKey' });
    const keys = await c.caughtUp('APIKey');
    expect(keys.length).toBe(1);
    expect(keys[0]?.Item.UserID).toBe(me.id);
    c.send({ Kind: 'App' });
    await c.until((x) => x.frames.some((f) => f.Kind === 'App'));
    expect(c.frames.find((f) => f.Kind === 'App')?.StatusCode).toBe(403);

    // A second key of the user appears, then is moved to another user: it leaves the view as a deletion.
    const n0 = c.frames.length;
    await update('users', other.id, { Name: { FullName: 'Not Mine' } });
    const extra = await create('apikeys', { Scopes: ['user'], UserID: me.id });
    await update('apikeys', extra.id, { UserID: other.id });
    await update('users', me.id, { Name: { FullName: 'Me' } });
    const live = (await c.count(n0 + 3)).slice(n0);
    expect(live.map((f) => [f.Kind, f.ID, Object.keys(f.Item).length > 0])).toEqual([
      ['APIKey', extra.id, true],
      ['APIKey', extra.id, false],
      ['User', me.id, true],
    ]);
    await new Promise((r) => setTimeout(r, 100));
    expect(c.frames.length).toBe(n0 + 3);
  });

  it('closes the streams of a deleted API key (4001), and not the others', async () => {
    const key = await s.keyFor(['admin']);
    const c = await connect(key);
    const bystander = await connect();
    c.send({ Kind: 'Group' });
    await c.caughtUp('Group');
    const keyId = await keyIdOf(key);
    await remove('apikeys', keyId);
    const closed = await c.waitClose();
    expect(closed.code).toBe(4001);
    expect(closed.reason).toMatch(/deleted/);
    await new Promise((r) => setTimeout(r, 50));
    expect(bystander.closed).toBeUndefined();
  });

  it('closes streams when the key expires or its user is suspended (4001, checked at each ping)', async () => {
    s.app.events.configure({ pingIntervalMs: 100 });
    try {
      // Timestamps have whole seconds: a moment 1.5 to 2.5 s from now.
      const soon = new Date(Math.ceil((Date.now() + 1500) / 1000) * 1000).toISOString();
      const keyRes = await s.req({
        method: 'POST',
        url: '/apikeys',
        payload: { Scopes: ['audit'], ExpireTime: soon },
      });
      expect(keyRes.statusCode).toBe(201);
      const expiring = await connect(keyRes.json().Secret as string);
      const u = await create('users', { Active: true });
      const userKey = await s.keyFor(['user'], u.id);
      const suspended = await connect(userKey);
      const bystander = await connect();
      await update('users', u.id, { SuspendAfter: soon });
      await new Promise((r) => setTimeout(r, 300));
      // Still open while valid; closed once the moment has passed.
      expect(expiring.closed).toBeUndefined();
      expect(suspended.closed).toBeUndefined();
      const [a, b] = await Promise.all([expiring.waitClose(5000), suspended.waitClose(5000)]);
      expect(a.code).toBe(4001);
      expect(a.reason).toMatch(/expired/);
      expect(b.code).toBe(4001);
      expect(bystander.closed).toBeUndefined();
    } finally {
      s.app.events.configure({ pingIntervalMs: 30_000 });
    }
  });

  it('sends StatusCode 100 "Integrity Level Changed" and closes when asked', async () => {
    const key = await s.keyFor(['admin']);
    const c = await connect(key);
    const other = await connect();
    c.send({ Kind: 'Group' });
    await c.caughtUp('Group');
    const keyId = await keyIdOf(key);
    const n = s.app.events.integrityChanged((p) => p.keyId === keyId);
    expect(n).toBe(1);
    const closed = await c.waitClose();
    const last = c.frames[c.frames.length - 1];
    expect(last).toEqual({ ID: '', Item: {}, StatusCode: 100, StatusText: 'Integrity Level Changed' });
    expect(closed.code).toBe(1000);
    expect(other.closed).toBeUndefined();
    expect(s.app.events.endStreams(() => false)).toBe(0);
  });

  it('drops a peer that stops answering pings, keeps one that answers', async () => {
    s.app.events.configure({ pingIntervalMs: 100 });
    try {
      const dead = await connect(undefined, { autoPong: false });
      const live = await connect();
      const closed = await dead.waitClose(3000);
      expect(closed.code).toBe(1006);
      expect(live.closed).toBeUndefined();
    } finally {
      s.app.events.configure({ pingIntervalMs: 30_000 });
    }
  });

  it('loses and duplicates nothing between snapshot and tail under concurrent writes', async () => {
    const groups = [];
    for (let i = 0; i < 5; i++) groups.push(await create('groups', { Name: `race-${i}-v0` }));
    const etags = new Map(groups.map((g) => [g.id, g.etag]));
    let k = 0;
    let stop = false;
    const writer = (async () => {
      while (!stop) {
        k++;
        const g = groups[k % groups.length] as { id: string };
        const res = await s.req({
          method: 'PUT',
          url: `/groups/${g.id}`,
          payload: { Name: `race-${k % groups.length}-v${k}` },
          headers: { 'if-match': etags.get(g.id) as string },
        });
        expect(res.statusCode).toBe(204);
        etags.set(g.id, res.headers.etag as string);
      }
    })();
    // Widen the window between subscribing and reading the snapshot, where changes are held.
    s.app.events.snapshot = async (...args) => {
      await new Promise((r) => setTimeout(r, Math.random() * 30));
      return takeSnapshot(...args);
    };
    const clients: EventClient[] = [];
    for (let i = 0; i < 6; i++) {
      const c = await connect();
      c.send({ Kind: 'Group' });
      clients.push(c);
      await new Promise((r) => setTimeout(r, 15));
    }
    for (const c of clients) await c.caughtUp('Group');
    s.app.events.snapshot = takeSnapshot;
    await new Promise((r) => setTimeout(r, 50));
    stop = true;
    await writer;
    const K = k;
    const version = (name: unknown) => Number(/-v(\d+)$/.exec(String(name))?.[1] ?? -1);
    const ours = new Set(groups.map((g) => g.id));
    for (const c of clients) {
      await c.until((x) => x.frames.some((f) => ours.has(f.ID) && version(f.Item.Name) === K), 5000, `v${K}`);
      const m = c.markerIndex('Group');
      const snap = c.frames.slice(0, m).filter((f) => ours.has(f.ID));
      const seen = Math.max(...snap.map((f) => version(f.Item.Name)));
      const liveVersions = c.frames
        .slice(m + 1)
        .filter((f) => ours.has(f.ID))
        .map((f) => version(f.Item.Name));
      // Exactly the writes after the snapshot, each once, in order.
      expect(liveVersions).toEqual(Array.from({ length: K - seen }, (_, i) => seen + 1 + i));
    }
  });
});
