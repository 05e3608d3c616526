import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers.js';
import { type OidcService, startOidcService } from './rp.js';

const DOC = readFileSync(new URL('../../docs/federation.md', import.meta.url), 'utf8');
/** The shell blocks of "Example: connect an application to Gatehouse", as written. */
const section = DOC.slice(DOC.indexOf('### Example: connect an application to Gatehouse'));
const blocks = [...section.slice(0, section.indexOf('### Benchmark')).matchAll(/```sh\n([\s\S]*?)```/g)].map(
  (m) => String(m[1]),
);

/** Runs a block in bash (asynchronously: the service answers from this same process). */
const bash = (script: string, env: Record<string, string>) =>
  new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      'bash',
      ['--noprofile', '--norc', '-e', '-o', 'pipefail', '-c', script],
      { env: { PATH: String(process.env.PATH), ...env }, encoding: 'utf8', timeout: 30_000 },
      (err, stdout, stderr) => resolve({ status: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });

describe(`docs/federation.md: connecting an application, as written (${backends()[0]})`, () => {
  let s: OidcService;
  beforeAll(async () => {
    s = await startOidcService(backends()[0] ?? 'sqlite');
  });
  afterAll(async () => s?.close());

  it('registers the App, issues its secret, and the client-credentials call works', async () => {
    expect(blocks.length).toBe(2);
    const reg = await bash(String(blocks[0]), { GH: s.base, KEY: s.adminKey });
    expect(reg.status, reg.stderr).toBe(0);
    const out = JSON.parse(reg.stdout.trim().split('\n').pop() ?? '') as {
      ClientID: string;
      ClientSecret: string;
    };
    expect(out.ClientID).toMatch(/^[a-z0-9]+$/);
    const app = await s.req({ method: 'GET', url: `/apps/${out.ClientID}` });
    const doc = app.json() as { OIDC: Record<string, unknown>; HaveOIDCSecret: boolean };
    expect(doc.OIDC.RedirectURIs).toEqual(['https://wiki.example.com/oidc/callback']);
    expect(doc.HaveOIDCSecret).toBe(true);
    // The text says to set ClientCredentials for the second block.
    const put = await s.req({
      method: 'PUT',
      url: `/apps/${out.ClientID}`,
      headers: { 'if-match': String(app.headers.etag) },
      payload: { ...doc, OIDC: { ...doc.OIDC, ClientCredentials: true } },
    });
    expect(put.statusCode, put.body).toBe(204);
    const cc = await bash(String(blocks[1]), {
      GH: s.base,
      CLIENT_ID: out.ClientID,
      CLIENT_SECRET: out.ClientSecret,
    });
    expect(cc.status, cc.stderr).toBe(0);
    const token = JSON.parse(cc.stdout) as Record<string, unknown>;
    expect(token.token_type).toBe('Bearer');
    expect(typeof token.access_token).toBe('string');
  });
});
