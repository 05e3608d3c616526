/**
 * What the proxy tells the client about a response's framing. The upstream parser accepts a
 * Content-Length repeated with one value ("5, 5", or the header twice), as RFC 9110 8.6 allows;
 * passing the repeats on made Node's own client (llhttp) refuse the response, and a client that
 * reads the first copy and a cache that reads the last one could disagree. The client gets it once.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProxy } from '../../src/proxy/run.js';
import { backends } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';

/** Upstream heads for a 5-byte body, each repeating Content-Length with the one value. */
const REPEATS = [
  'content-length: 5\r\ncontent-length: 5\r\n',
  'content-length: 5, 5\r\n',
  'Content-Length: 5\r\ncontent-length: 5,5\r\n',
];

describe.each(backends())('response framing towards the client on %s', (backend) => {
  let w: World;
  let p: RunningProxy;
  let upstream: net.Server;
  let head = REPEATS[0] as string;
  beforeAll(async () => {
    w = await startWorld(backend);
    upstream = net.createServer((s) => {
      s.on('error', () => undefined);
      s.on('data', () => s.write(`HTTP/1.1 200 OK\r\n${head}\r\nhello`));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    p = await w.proxy({ env: { SVC_PROXY_AUTH: 'none', SVC_PROXY_UPSTREAM: url } });
  });
  afterAll(async () => {
    await w?.close();
    await new Promise((r) => upstream?.close(r));
  });

  it.each(REPEATS)('a repeated Content-Length reaches the client once: %j', async (repeated) => {
    head = repeated;
    // Node's client (llhttp) reads the response.
    const body = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      http
        .get(`${p.url}/x`, { agent: false }, (res) => {
          let text = '';
          res.setEncoding('latin1');
          res.on('data', (d: string) => {
            text += d;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        })
        .on('error', reject);
    });
    expect(body).toEqual({ status: 200, text: 'hello' });
    // And on the wire: one Content-Length line, one value.
    const raw = await new Promise<string>((resolve) => {
      const s = net.connect(Number(new URL(p.url).port), '127.0.0.1', () =>
        s.write('GET /y HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n'),
      );
      let text = '';
      s.setEncoding('latin1');
      s.on('data', (d: string) => {
        text += d;
      });
      s.on('close', () => resolve(text));
    });
    const lines = raw.split('\r\n\r\n')[0]?.split('\r\n') ?? [];
    expect(lines.filter((l) => /^content-length:/i.test(l)).map((l) => l.toLowerCase())).toEqual([
      'content-length: 5',
    ]);
  });
});
