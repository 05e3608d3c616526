import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventClient } from '../../../events/client.js';
import { backends, startTestService, type TestService } from '../../../helpers.js';
import { Browser, freshIp, PW, signIn } from '../../../kit/index.js';
import { requesterAndColleague, send, webm } from './kit.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Bytes held in ArrayBuffers (every Buffer) by this process, after a full collection. */
function buffered(): number {
  gc();
  gc();
  return process.memoryUsage().arrayBuffers;
}

const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Over real sockets: a 20 MiB video goes into the database and comes back out as a stream, so
 * the service holds a chunk or two of it at a time, never the whole video (the service runs in
 * this process: its Buffers are counted in process.memoryUsage().arrayBuffers). And the Auth
 * event stream of the requester reports the raised level when a colleague approves.
 */
describe.each(backends())('vouch videos over HTTP on %s', { timeout: 180_000 }, (backend) => {
  let s: TestService;
  let base: string;
  beforeAll(async () => {
    s = await startTestService(backend);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => s?.close());

  it('streams a 20 MiB upload in and a download out without holding the video in memory', async () => {
    const { requester } = await requesterAndColleague(s);
    const video = webm(20 * MiB);
    const digest = createHash('sha256').update(video).digest('hex');
    const port = (s.app.server.address() as AddressInfo).port;

    // Upload in 64 KiB writes; halfway, stop sending and measure while the service waits for more.
    const before = buffered();
    let midway = 0;
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          port,
          host: '127.0.0.1',
          method: 'PUT',
          path: `/users/${requester.id}/reference-video`,
          headers: {
            authorization: `Bearer ${s.adminKey}`,
            'content-type': 'video/webm',
            'content-length': String(video.length),
            'x-magic-words': 'apple,banjo',
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      (async () => {
        for (let at = 0; at < video.length; at += 64 * 1024) {
          if (!req.write(video.subarray(at, at + 64 * 1024))) await new Promise((r) => req.once('drain', r));
          if (at === 10 * MiB) {
            await sleep(500);
            midway = buffered() - before;
          }
        }
        req.end();
      })().catch(reject);
    });
    expect(status).toBe(204);
    expect(midway).toBeLessThan(6 * MiB);

    // Download: read the first bytes, then stop reading and measure; then read the rest.
    const start = buffered();
    let paused = 0;
    const hash = createHash('sha256');
    let total = 0;
    const headers = await new Promise<http.IncomingHttpHeaders>((resolve, reject) => {
      http
        .get(
          {
            port,
            host: '127.0.0.1',
            path: `/users/${requester.id}/reference-video`,
            headers: { authorization: `Bearer ${s.adminKey}` },
          },
          (res) => {
            let first = true;
            res.on('data', (c: Buffer) => {
              hash.update(c);
              total += c.length;
              if (first) {
                first = false;
                res.pause();
                sleep(500).then(() => {
                  paused = buffered() - start;
                  res.resume();
                });
              }
            });
            res.on('end', () => resolve(res.headers));
            res.on('error', reject);
          },
        )
        .on('error', reject);
    });
    expect(headers['content-type']).toBe('video/webm');
    expect(headers['content-length']).toBe(String(video.length));
    expect(total).toBe(video.length);
    expect(hash.digest('hex')).toBe(digest);
    expect(paused).toBeLessThan(6 * MiB);
  });

  it('an approval raises the requester and its Auth stream reports the new level', async () => {
    const { requester, colleague } = await requesterAndColleague(s);
    // The requester lost the TOTP device: signed in with the password only (level 2).
    const r = new Browser(s, { ip: freshIp() });
    await r.post('/auth/email', { email: requester.email });
    expect((await r.post('/auth/password', { password: PW })).statusCode).toBe(204);
    const cookie = [...r.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const events = await EventClient.open(base, undefined, { headers: { cookie, origin: base } });
    events.send({ Kind: 'Auth' });
    const auth = await events.caughtUp('Auth');
    expect(auth[0]?.Item.IntegrityLevel).toBe(2);

    const v = (await r.post('/auth/vouch')).json();
    expect((await send(r, 'POST', `/auth/vouch/${v.ID}/video`, webm())).statusCode).toBe(204);
    const c = await signIn(s, colleague, { password: true, totp: true }, { level: 3 });
    const videoId = (await c.req({ url: `/auth/vouch/${v.ID}` })).json().VideoID as string;
    expect((await c.post(`/auth/vouch/${v.ID}/approve`, { video: videoId })).statusCode).toBe(200);

    await events.waitClose();
    const raised = events.frames.findLast((f) => f.Kind === 'Auth' && f.ID === auth[0]?.ID);
    expect(raised?.Item).toMatchObject({ IntegrityLevel: 3 });
    expect(raised?.Item.Proven).toContain('vouch');
    expect(events.frames[events.frames.length - 1]).toMatchObject({ StatusCode: 100 });
  });
});
