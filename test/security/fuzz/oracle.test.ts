/**
 * The response fuzzer's reference (llhttp driven directly, llhttp.ts) must read responses the
 * way node:http's client does: checked here on the corpus with a real http.request against a raw
 * server that writes the bytes and closes.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llhttpResponse } from './llhttp.js';
import type { ResponseCase } from './response.js';
import { fuzzSettings, readCorpus, wants } from './run.js';

type ClientView = { kind: 'complete'; statuses: number[]; body: string } | { kind: 'refused' };

describe.skipIf(!wants(fuzzSettings(), 'response'))('the llhttp reference of the response fuzzer', () => {
  let server: net.Server;
  let next: Buffer = Buffer.alloc(0);
  beforeAll(async () => {
    server = net.createServer((sock) => {
      sock.on('error', () => undefined);
      // Write the response once the request head has arrived, then close.
      sock.once('data', () => sock.end(next));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  function viaClient(input: Buffer, head: boolean): Promise<ClientView> {
    next = input;
    const port = (server.address() as AddressInfo).port;
    return new Promise((resolve) => {
      const statuses: number[] = [];
      let settled = false;
      const done = (v: ClientView) => {
        if (!settled) resolve(v);
        settled = true;
      };
      const req = http.request({ host: '127.0.0.1', port, method: head ? 'HEAD' : 'GET', agent: false });
      req.on('information', (i) => statuses.push(i.statusCode));
      req.on('response', (res) => {
        statuses.push(res.statusCode ?? 0);
        const body: Buffer[] = [];
        res.on('data', (c: Buffer) => body.push(c));
        res.on('end', () =>
          done({ kind: 'complete', statuses, body: Buffer.concat(body).toString('latin1') }),
        );
        res.on('error', () => done({ kind: 'refused' }));
        res.on('aborted', () => done({ kind: 'refused' }));
      });
      req.on('error', () => done({ kind: 'refused' }));
      req.end();
    });
  }

  it('agrees with http.request on the corpus responses (status, informational heads, body, refusal)', async () => {
    const corpus = readCorpus<ResponseCase>('response');
    let compared = 0;
    for (const { file, input } of corpus) {
      const bytes = Buffer.from(input.input, 'latin1');
      const ref = llhttpResponse(bytes, input.head);
      // Bytes after the end of a response make Node's client destroy the socket, which may cut
      // the response it already read: where the response ends is then only seen by the reference.
      if (ref.kind === 'complete' && typeof ref.end === 'number' && ref.end < bytes.length) continue;
      const client = await viaClient(bytes, input.head);
      // A 101 hands the connection over (the client then has no HTTP framing to speak of); the
      // reference counts it a refusal, as the proxy does for requests that did not ask to switch.
      if (client.kind === 'complete' && client.statuses.includes(101)) continue;
      const expected =
        ref.kind === 'complete'
          ? { kind: 'complete', statuses: ref.statuses, body: ref.body }
          : { kind: 'refused' };
      expect({ file, view: client }).toEqual({ file, view: expected });
      compared++;
    }
    expect(compared).toBeGreaterThan(corpus.length / 2);
  });
});
