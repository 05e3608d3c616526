import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProxy } from '../../src/proxy/run.js';
import { freePort } from '../net.js';
import { startWorld, type World } from './harness.js';

const dir = mkdtempSync(join(tmpdir(), 'gh-proxy-tls-'));

/** A self-signed certificate for the given names (openssl), as files. */
function selfSigned(name: string, sans: string) {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      `subjectAltName=${sans}`,
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

function httpsGet(
  port: number,
  servername: string,
  path: string,
  opts: { ca?: string | Buffer; headers?: Record<string, string> } = {},
) {
  return new Promise<{ status: number; body: string; cert: tls.PeerCertificate }>((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        servername,
        headers: { host: servername, ...opts.headers },
        ca: opts.ca,
        rejectUnauthorized: opts.ca !== undefined,
        agent: false,
      },
      (res) => {
        const cert = (res.socket as tls.TLSSocket).getPeerCertificate();
        let body = '';
        res.on('data', (d) => {
          body += d;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            cert,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A plaintext request with a chosen Host header (fetch does not let one set it). */
const plainGet = (port: number, host: string, path: string) =>
  new Promise<{ status: number; headers: { get(n: string): string | undefined } }>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
        res.resume();
        resolve({
          status: res.statusCode ?? 0,
          headers: { get: (n: string) => res.headers[n] as string | undefined },
        });
      })
      .on('error', reject);
  });

describe('proxy TLS', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld('sqlite');
  });
  afterAll(async () => w?.close());

  it('serves TLS from proxy.cert/proxy.key and redirects plaintext to https', async () => {
    const { cert, key } = selfSigned('app.test', 'DNS:app.test');
    const p = await w.proxy({
      env: {
        SVC_PROXY_TLS: 'true',
        SVC_PROXY_CERT: cert,
        SVC_PROXY_KEY: key,
        SVC_REDIRECT_LISTEN: '127.0.0.1:0',
        SVC_PATH_open_AUTH: 'none',
      },
    });
    expect(p.url).toMatch(/^https:/);
    const r = await httpsGet(p.port, 'app.test', '/open/x', { ca: readFileSync(cert) });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).headers['x-forwarded-proto']).toBe('https');
    // Under TLS the proxy's cookies are Secure.
    const signin = await new Promise<{ status: number; cookie: string }>((resolve, reject) => {
      https
        .get(
          {
            host: '127.0.0.1',
            port: p.port,
            path: '/private',
            servername: 'app.test',
            ca: readFileSync(cert),
            agent: false,
            headers: { host: 'app.test', accept: 'text/html' },
          },
          (res) => {
            res.resume();
            resolve({ status: res.statusCode ?? 0, cookie: String(res.headers['set-cookie']) });
          },
        )
        .on('error', reject);
    });
    expect(signin.status).toBe(302);
    expect(signin.cookie).toMatch(/^gatehouse_proxy_state=.*; Secure/);
    const red = await plainGet(p.redirectPort as number, 'app.test', '/a?b=1');
    expect(red.status).toBe(308);
    expect(red.headers.get('location')).toBe(`https://app.test:${p.port}/a?b=1`);
  });

  it('stops at start-up when the certificate cannot be read', async () => {
    await expect(
      w.proxy({
        env: { SVC_PROXY_TLS: 'true', SVC_PROXY_CERT: '/nonexistent.crt', SVC_PROXY_KEY: '/nonexistent.key' },
      }),
    ).rejects.toThrow(/proxy\.cert/);
  });

  describe('ACME against pebble', () => {
    const procs: ChildProcess[] = [];
    let acmePort: number;
    let mgmtPort: number;
    let redirectPort: number;
    let pebbleCa: string;
    beforeAll(async () => {
      // The test CA comes from Debian's pebble package; install it when missing.
      try {
        execFileSync('sh', ['-c', 'command -v pebble && command -v pebble-challtestsrv'], {
          stdio: 'ignore',
        });
      } catch {
        execFileSync('apt-get', ['install', '-y', 'pebble'], { stdio: 'ignore', timeout: 300_000 });
      }
      // Pebble's own HTTPS listener needs a certificate; the proxy trusts it through acme.cacert.
      const own = selfSigned('localhost', 'DNS:localhost,IP:127.0.0.1');
      pebbleCa = own.cert;
      [acmePort, mgmtPort, redirectPort] = [await freePort(), await freePort(), await freePort()];
      const dnsPort = await freePort();
      const config = join(dir, 'pebble.json');
      writeFileSync(
        config,
        JSON.stringify({
          pebble: {
            listenAddress: `127.0.0.1:${acmePort}`,
            managementListenAddress: `127.0.0.1:${mgmtPort}`,
            certificate: own.cert,
            privateKey: own.key,
            // HTTP-01 validation really fetches the challenge from the proxy's redirect listener.
            httpPort: redirectPort,
            tlsPort: 5001,
            ocspResponderURL: '',
            externalAccountBindingRequired: false,
          },
        }),
      );
      // Every name resolves to 127.0.0.1 through the challenge test server's DNS.
      const dns = spawn(
        'pebble-challtestsrv',
        [
          '-defaultIPv4',
          '127.0.0.1',
          '-defaultIPv6',
          '',
          '-dns01',
          `127.0.0.1:${dnsPort}`,
          '-http01',
          '',
          '-https01',
          '',
          '-tlsalpn01',
          '',
          '-management',
          `127.0.0.1:${await freePort()}`,
        ],
        { stdio: 'ignore' },
      );
      procs.push(dns);
      const pebble = spawn('pebble', ['-config', config, '-dnsserver', `127.0.0.1:${dnsPort}`], {
        env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      procs.push(pebble);
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('pebble did not start')), 20_000);
        const onData = (d: Buffer) => {
          if (/Listening on/.test(d.toString())) {
            clearTimeout(t);
            resolve();
          }
        };
        pebble.stdout?.on('data', onData);
        pebble.stderr?.on('data', onData);
      });
    }, 330_000);
    afterAll(() => {
      for (const p of procs) p.kill('SIGTERM');
    });

    it('obtains certificates by HTTP-01 for proxy.name and VirtualHost names only', async () => {
      const vh = await w.s.req({
        method: 'POST',
        url: '/virtualhosts/vh.test',
        payload: { AppID: w.appId, Upstream: w.echo.url },
      });
      expect(vh.statusCode).toBe(201);
      // A VirtualHost that does not want ACME gets no certificate.
      const manual = await w.s.req({
        method: 'POST',
        url: '/virtualhosts/manual.test',
        payload: { AppID: w.appId, ACME: false },
      });
      expect(manual.statusCode).toBe(201);
      const p: RunningProxy = await w.proxy({
        env: {
          SVC_PROXY_TLS: 'true',
          SVC_PROXY_NAME: 'proxy.test',
          SVC_REDIRECT_LISTEN: `127.0.0.1:${redirectPort}`,
          SVC_ACME_SERVER: `https://127.0.0.1:${acmePort}/dir`,
          SVC_ACME_CACERT: pebbleCa,
          SVC_ACME_DIR: join(dir, 'acme'),
          SVC_PATH_open_AUTH: 'none',
        },
      });
      const root = await fetch(`https://127.0.0.1:${mgmtPort}/roots/0`, {
        // @ts-expect-error undici's dispatcher option: trust pebble's own listener certificate
        dispatcher: new (await import('undici')).Agent({ connect: { ca: readFileSync(pebbleCa) } }),
      }).then((r) => r.text());
      const first = await httpsGet(p.port, 'proxy.test', '/open/x');
      expect(first.status).toBe(200);
      expect(first.cert.subjectaltname).toContain('DNS:proxy.test');
      expect(String(first.cert.issuer.CN)).toMatch(/Pebble/);
      // The chain verifies against pebble's root.
      const chain = await httpsGet(p.port, 'proxy.test', '/open/y', { ca: root });
      expect(chain.status).toBe(200);
      const vhr = await httpsGet(p.port, 'vh.test', '/open/z', { ca: root });
      expect(vhr.cert.subjectaltname).toContain('DNS:vh.test');
      await expect(httpsGet(p.port, 'evil.test', '/open/x')).rejects.toThrow();
      await expect(httpsGet(p.port, 'manual.test', '/open/x')).rejects.toThrow();
      // Stored for the next start, key readable by the owner only.
      const stored = new X509Certificate(readFileSync(join(dir, 'acme', 'proxy.test.crt')));
      expect(stored.subjectAltName).toContain('proxy.test');
      expect(await p.tls?.accountContact()).toEqual(['mailto:hostmaster@proxy.test']);
      // The plaintext listener redirects everything but challenges.
      const red = await plainGet(redirectPort, 'proxy.test', '/p');
      expect(red.status).toBe(308);
      // Renewal: a certificate inside its last 30 days is replaced by the periodic check.
      const mgr = p.tls as unknown as { held: Map<string, { notAfter: number }>; renewDue(): Promise<void> };
      const before = first.cert.serialNumber;
      (mgr.held.get('proxy.test') as { notAfter: number }).notAfter = Date.now() + 86_400_000;
      await mgr.renewDue();
      const renewed = await httpsGet(p.port, 'proxy.test', '/open/r', { ca: root });
      expect(renewed.cert.serialNumber).not.toBe(before);
      expect(new X509Certificate(readFileSync(join(dir, 'acme', 'proxy.test.crt'))).serialNumber).toBe(
        renewed.cert.serialNumber,
      );
      await p.close();
    }, 60_000);

    it('without proxy.name, takes the first host asked for, and only that one', async () => {
      const p = await w.proxy({
        env: {
          SVC_PROXY_TLS: 'true',
          SVC_REDIRECT_LISTEN: `127.0.0.1:${redirectPort}`,
          SVC_ACME_SERVER: `https://127.0.0.1:${acmePort}/dir`,
          SVC_ACME_CACERT: pebbleCa,
          SVC_ACME_DIR: join(dir, 'acme2'),
          SVC_ACME_EMAIL: 'ops@example.org',
          SVC_PATH_open_AUTH: 'none',
        },
      });
      const first = await httpsGet(p.port, 'first.test', '/open/x');
      expect(first.status).toBe(200);
      expect(first.cert.subjectaltname).toContain('DNS:first.test');
      await expect(httpsGet(p.port, 'second.test', '/open/x')).rejects.toThrow();
      expect(await p.tls?.accountContact()).toEqual(['mailto:ops@example.org']);
      await p.close();
    }, 60_000);
  });
});
