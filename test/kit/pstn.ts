import { createServer, type Server } from 'node:http';
import { freePort } from '../net.js';

/** One request the fake provider received. */
export interface ProviderRequest {
  path: string;
  authorization: string;
  form: Record<string, string>;
}

/**
 * A fake of the common SMS/voice HTTP API (account SID + token, form-encoded Messages.json and
 * Calls.json) on 127.0.0.1, for the service's pstn.provider=http. `status` sets its answer.
 */
export class FakeProvider {
  readonly requests: ProviderRequest[] = [];
  status = 201;
  private waiters: (() => void)[] = [];
  private constructor(
    readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<FakeProvider> {
    const port = await freePort();
    let fake: FakeProvider | undefined;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
        fake?.requests.push({ path: req.url ?? '', authorization: req.headers.authorization ?? '', form });
        for (const w of fake?.waiters.splice(0) ?? []) w();
        res.writeHead(fake?.status ?? 500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ sid: 'SM0001', status: 'queued' }));
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    fake = new FakeProvider(server, port);
    return fake;
  }

  env(sid = 'AC0123456789', token = 'provider-token'): NodeJS.ProcessEnv {
    return {
      SVC_PSTN_PROVIDER: 'http',
      SVC_PSTN_BASEURL: `http://127.0.0.1:${this.port}`,
      SVC_PSTN_ACCOUNTSID: sid,
      SVC_PSTN_TOKEN: token,
      SVC_PSTN_FROM: '+15550000000',
    };
  }

  /** Waits for a request to `to` after the first `after` requests. */
  async next(to: string, after: number, ms = 5000): Promise<ProviderRequest> {
    const deadline = Date.now() + ms;
    for (;;) {
      const hit = this.requests.slice(after).find((r) => r.form.To === to);
      if (hit) return hit;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no message to ${to} within ${ms} ms`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The 6-digit code of an SMS body or of the text a call reads out ("1 2 3 4 5 6"). */
export function codeOf(r: ProviderRequest): string {
  const text = r.form.Body ?? r.form.Twiml ?? '';
  const m = /(\d(?: ?\d){5})/.exec(text);
  if (!m) throw new Error(`no code in ${JSON.stringify(r.form)}`);
  return (m[1] as string).replace(/ /g, '');
}
