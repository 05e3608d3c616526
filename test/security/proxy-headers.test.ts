/**
 * What the proxy forwards: no client header that an upstream could take for one of the proxy's
 * own (any case, any mix of "-", "_" and "."), Connection never removing Host, no Gatehouse cookie
 * (the proxy's or the service's, in any spelling the service reads) and no client Authorization
 * that holds a Gatehouse key or could pass for the synthetic one. Attacks are generated with
 * fast-check and sent over a raw socket; the upstream reports the raw header names it received.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCookies } from '../../src/auth/session/cookies.js';
import { stripOwnCookies } from '../../src/proxy/cookie.js';
import { isReserved } from '../../src/proxy/http.js';
import type { RunningProxy } from '../../src/proxy/run.js';
import { Browser, makeUser, signedIn } from '../auth/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { basic, startWorld, type World } from '../proxy/harness.js';
import { finalResponses, rawExchange } from './raw.js';

/** Names only the proxy may send upstream, as the proxy spells them, plus names no client may send. */
const RESERVED = [
  'x-service-user',
  'x-service-email',
  'x-service-user-name',
  'x-service-full-name',
  'x-service-auth-type',
  'x-service-session-expires',
  'x-service-access-check',
  'x-service-not-yet-invented',
  'x-remote-user',
  'remote-user',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-port',
  'forwarded',
  'x-real-ip',
  'proxy',
];
/** Hop-by-hop and framing names of more than one word: any other spelling could pass for them. */
const HOP_WORDS = [
  'transfer-encoding',
  'content-length',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'http2-settings',
];
const ALWAYS = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-service-access-check'];
const IDENTITY = [
  'x-service-user-name',
  'x-service-email',
  'x-service-full-name',
  'x-service-user',
  'x-remote-user',
  'x-service-auth-type',
  'authorization',
];
/** How CGI, WSGI and PHP upstreams see a header name: case and separators do not count. */
const canonical = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, '-');

/** A spelling of `name` in random case with each separator one of "-", "_", ".". */
const spelled = (name: string) =>
  fc
    .tuple(
      fc.array(fc.constantFrom('-', '_', '.'), { minLength: 8, maxLength: 8 }),
      fc.array(fc.boolean(), { minLength: name.length, maxLength: name.length }),
    )
    .map(([seps, upper]) => {
      let i = 0;
      return [...name]
        .map((c, j) => (c === '-' ? (seps[i++ % seps.length] as string) : upper[j] ? c.toUpperCase() : c))
        .join('');
    });
/** A spelling of a multi-word hop-by-hop name that is not the name itself (some "_" or "."). */
const misspeltHop = fc
  .constantFrom(...HOP_WORDS)
  .chain(spelled)
  .filter((n) => /[_.]/.test(n));
const anyCase = (s: string) =>
  fc
    .array(fc.boolean(), { minLength: s.length, maxLength: s.length })
    .map((up) => [...s].map((c, i) => (up[i] ? c.toUpperCase() : c.toLowerCase())).join(''));

describe('header and cookie rules (no database)', () => {
  it('every spelling of a reserved name, and every other spelling of a framing name, is reserved', () => {
    fc.assert(fc.property(fc.constantFrom(...RESERVED).chain(spelled), (n) => isReserved(n.toLowerCase())));
    fc.assert(fc.property(misspeltHop, (n) => isReserved(n.toLowerCase())));
    for (const n of [
      'host',
      'accept',
      'x-requested-with',
      'referer',
      'range',
      'pragma',
      'x-service',
      'xforwarded-for',
    ])
      expect(isReserved(n)).toBe(false);
  });

  it('the proxy strips every cookie the service reads as its own, and keeps the others in order', () => {
    const names = [
      'gatehouse_session',
      'gatehouse_device',
      '__Host-gatehouse_session',
      '__Host-gatehouse_device',
    ];
    const ws = fc.constantFrom('', ' ', '\t', '\u00a0', '  ');
    const ours = fc
      .tuple(ws, fc.constantFrom(...names, 'gatehouse_proxy', 'gatehouse_proxy_state'), ws, fc.boolean())
      .chain(([a, n, b, cased]) => (cased ? anyCase(n) : fc.constant(n)).map((m) => `${a}${m}${b}`));
    const theirs = fc.stringMatching(/^[a-z][a-z0-9]{0,6}$/).map((n) => `app${n}`);
    const entry = fc.oneof(
      ours.map((name) => ({ name, mine: true })),
      theirs.map((name) => ({ name, mine: false })),
    );
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 8 }), fc.constantFrom('; ', ';', ' ;'), (entries, sep) => {
        const parts = entries.map((e, i) => `${e.name}=${e.mine ? 'SECRET' : 'v'}${i}`);
        const header = parts.join(sep);
        const kept = stripOwnCookies(header) ?? '';
        expect(kept).not.toContain('SECRET');
        const service = readCookies({ headers: { cookie: kept } } as unknown as FastifyRequest);
        for (const n of names) expect(service.has(n)).toBe(false);
        const wanted = entries.flatMap((e, i) => (e.mine ? [] : [`${e.name.trim()}=v${i}`]));
        expect(kept === '' ? [] : kept.split(';').map((p) => p.trim())).toEqual(wanted);
      }),
    );
  });
});

interface Seen {
  url: string;
  rawHeaders: string[];
}

/** An upstream answering with the raw header names and values it got; `?set=` values become Set-Cookie. */
async function startRecorder() {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const set = new URL(req.url ?? '/', 'http://x').searchParams.getAll('set');
      res.writeHead(200, ['content-type', 'application/json', ...set.flatMap((c) => ['set-cookie', c])]);
      res.end(Buffer.from(JSON.stringify({ url: req.url, rawHeaders: req.rawHeaders }), 'utf8'));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Header pairs [name, value] as the upstream received them. */
const pairs = (s: Seen) =>
  s.rawHeaders.flatMap((v, i) => (i % 2 ? [] : [[v, s.rawHeaders[i + 1] as string]]));

describe.each(backends())('what the proxy forwards (%s)', (backend) => {
  let w: World;
  let p: RunningProxy;
  let port: number;
  let host: string;
  let recorder: Awaited<ReturnType<typeof startRecorder>>;
  let signedCookie: string;
  const MODES = { none: '/none/x', optional: '/opt/x', required: '/req/x' } as const;
  type Mode = keyof typeof MODES;

  beforeAll(async () => {
    w = await startWorld(backend);
    recorder = await startRecorder();
    p = await w.proxy({
      env: { SVC_PROXY_UPSTREAM: recorder.url },
      overrides: ['path_/none/_auth=none', 'path_/opt/_auth=optional'],
    });
    port = p.port;
    host = `127.0.0.1:${port}`;
    const id = { UserID: w.user.id, UserName: 'ada', Email: w.user.email, FullName: 'Ada', SessionID: 's1' };
    signedCookie = `gatehouse_proxy=${(await p.proxy.signer.sign(id)).token}`;
  });
  afterAll(async () => {
    await w?.close();
    await recorder?.close();
  });

  /** Sends one request on its own connection; `lines` are header lines without CRLF. */
  async function send(path: string, lines: string[], connection = 'close', body?: string) {
    const framing = body === undefined ? '' : `Content-Length: ${body.length}\r\n`;
    const text = `${body === undefined ? 'GET' : 'POST'} ${path} HTTP/1.1\r\nHost: ${host}\r\n${lines.map((l) => `${l}\r\n`).join('')}${framing}Connection: ${connection}\r\n\r\n${body ?? ''}`;
    const [r] = finalResponses(await rawExchange(port, text, { idleMs: 1000 }));
    if (!r) throw new Error('no response');
    const text8 = Buffer.from(r.body, 'latin1').toString('utf8');
    const seen = r.status === 200 ? (JSON.parse(text8) as Seen) : undefined;
    return { status: r.status, headers: r.headers, seen };
  }

  const credentials = () => ({
    none: [] as string[],
    bearer: [`Authorization: Bearer ${w.userKey}`],
    basicUser: [`Authorization: ${basic(w.userKey, '')}`],
    basicPassword: [`Authorization: ${basic('me', w.userKey)}`],
    cookie: [`Cookie: ${signedCookie}`],
  });
  type Credential = keyof ReturnType<typeof credentials>;
  const modeAndCredential = fc
    .tuple(
      fc.constantFrom<Mode>('none', 'optional', 'required'),
      fc.constantFrom<Credential>('none', 'bearer', 'basicUser', 'basicPassword', 'cookie'),
    )
    .filter(([m, c]) => !(m === 'required' && c === 'none'));

  /** The upstream got the proxy's headers exactly once, spelled as the proxy spells them, and nothing like them. */
  function expectOnlyProxyHeaders(seen: Seen, identified: boolean) {
    const expected = identified ? [...ALWAYS, ...IDENTITY] : ALWAYS;
    const got = pairs(seen)
      .map(([n]) => n as string)
      .filter((n) => isReservedName(n) || canonical(n) === 'authorization');
    expect(got.sort()).toEqual([...expected].sort());
    for (const [n, v] of pairs(seen)) expect(`${n}: ${v}`).not.toMatch(/forged/i);
    for (const [n] of pairs(seen)) expect(/[_.]/.test(n as string), n).toBe(false);
  }
  const isReservedName = (n: string) =>
    RESERVED.some((r) => canonical(n) === r) || /^x-(service|forwarded)-/.test(canonical(n));

  it('no spelling of a reserved header reaches the upstream, in any mode, with or without credentials', async () => {
    const forged = fc.array(
      fc
        .tuple(fc.oneof(fc.constantFrom(...RESERVED).chain(spelled), misspeltHop), fc.nat(99))
        .map(([n, v]) => `${n}: forged${v}`),
      { minLength: 1, maxLength: 6 },
    );
    await fc.assert(
      fc.asyncProperty(
        modeAndCredential,
        forged,
        fc.option(fc.constant('body')),
        async ([mode, cred], lines, body) => {
          const r = await send(MODES[mode], [...credentials()[cred], ...lines], 'close', body ?? undefined);
          expect(r.status).toBe(200);
          expectOnlyProxyHeaders(r.seen as Seen, mode !== 'none' && cred !== 'none');
        },
      ),
      { numRuns: 60 },
    );
  });

  it('Connection cannot remove Host or the proxy headers, and still removes hop-by-hop extensions', async () => {
    const named = fc.subarray(
      [
        'host',
        'x-forwarded-for',
        'x-forwarded-host',
        'x-service-user',
        'x-service-access-check',
        'authorization',
        'cookie',
        'x-remote-user',
        'x-hop',
      ],
      { minLength: 1 },
    );
    await fc.assert(
      fc.asyncProperty(
        modeAndCredential,
        named.chain((ns) => fc.tuple(...ns.map(anyCase))),
        async ([mode, cred], tokens) => {
          const r = await send(
            MODES[mode],
            [...credentials()[cred], 'X-Hop: 1', 'X-Kept: 1'],
            ['close', ...tokens].join(', '),
          );
          expect(r.status).toBe(200);
          const seen = r.seen as Seen;
          const names = pairs(seen).map(([n]) => (n as string).toLowerCase());
          expect(names.filter((n) => n === 'host')).toHaveLength(1);
          expect(pairs(seen).find(([n]) => n?.toLowerCase() === 'host')?.[1]).toBe(host);
          expect(names).toContain('x-kept');
          expect(names.includes('x-hop')).toBe(!tokens.some((t) => t.toLowerCase() === 'x-hop'));
          expectOnlyProxyHeaders(seen, mode !== 'none' && cred !== 'none');
        },
      ),
      { numRuns: 40 },
    );
  });

  it("no Gatehouse cookie reaches the upstream in any spelling the service or the proxy reads; the app's cookies do", async () => {
    const ours = fc
      .tuple(
        fc.constantFrom('', ' ', '\t'),
        fc.constantFrom('', '__Host-', '__Secure-').chain(anyCase),
        fc
          .constantFrom('gatehouse_session', 'gatehouse_device', 'gatehouse_proxy', 'gatehouse_proxy_state')
          .chain(anyCase),
        fc.constantFrom('', ' '),
      )
      .map(([a, prefix, n, b]) => ({ name: `${a}${prefix}${n}${b}`, mine: true }));
    const theirs = fc.stringMatching(/^[a-z]{1,6}$/).map((n) => ({ name: `app${n}`, mine: false }));
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<[Mode, Credential]>(
          ['none', 'none'],
          ['optional', 'none'],
          ['optional', 'bearer'],
          ['required', 'basicUser'],
        ),
        fc.array(fc.oneof(ours, theirs), { minLength: 1, maxLength: 6 }),
        async ([mode, cred], entries) => {
          const cookie = entries.map((e, i) => `${e.name}=${e.mine ? 'SECRET' : 'v'}${i}`).join('; ');
          const r = await send(MODES[mode], [...credentials()[cred], `Cookie: ${cookie}`]);
          expect(r.status).toBe(200);
          const got = pairs(r.seen as Seen).filter(([n]) => n?.toLowerCase() === 'cookie');
          expect(JSON.stringify(got)).not.toContain('SECRET');
          const wanted = entries.flatMap((e, i) => (e.mine ? [] : [`${e.name}=v${i}`]));
          expect(got.map(([, v]) => v)).toEqual(wanted.length ? [wanted.join('; ')] : []);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("the service's session and device cookies sent to a proxy on the same host cannot be replayed from the upstream", async () => {
    await makeUser(w.s, { email: 'root@example.com', password: 'a long admin password 1', admin: true });
    const b = await signedIn(w.s, 'root@example.com', 'a long admin password 1');
    const cookie = `gatehouse_session=${b.session}; gatehouse_device=${b.device}; theme=dark`;
    const replay = (c: string) => w.s.app.inject({ method: 'GET', url: '/users/me', headers: { cookie: c } });
    expect((await replay(cookie)).statusCode).toBe(200); // the cookies are the (admin) user's API
    for (const [mode, cred] of [
      ['none', 'none'],
      ['optional', 'none'],
      ['required', 'bearer'],
      ['required', 'cookie'],
    ] as const) {
      const r = await send(MODES[mode], [
        ...credentials()[cred].filter((l) => !l.startsWith('Cookie')),
        `Cookie: ${cred === 'cookie' ? `${signedCookie}; ` : ''}${cookie}`,
      ]);
      expect(r.status).toBe(200);
      const seen = JSON.stringify(r.seen);
      expect(seen).not.toContain(b.session as string);
      expect(seen).not.toContain(b.device as string);
      const forwarded = pairs(r.seen as Seen).find(([n]) => n?.toLowerCase() === 'cookie')?.[1] ?? '';
      expect(forwarded).toBe('theme=dark');
      expect((await replay(forwarded)).statusCode).toBe(401);
    }
  });

  it('an upstream cannot set Gatehouse cookies on the client (no session fixation through the app)', async () => {
    const name = fc
      .tuple(
        fc.constantFrom('', ' '),
        fc.constantFrom('', '__Host-', '__Secure-').chain(anyCase),
        fc
          .constantFrom('gatehouse_session', 'gatehouse_device', 'gatehouse_proxy', 'gatehouse_proxy_state')
          .chain(anyCase),
      )
      .map((parts) => parts.join(''));
    await fc.assert(
      fc.asyncProperty(fc.array(name, { minLength: 1, maxLength: 3 }), async (names) => {
        const set = [...names.map((n) => `${n}=planted; Path=/`), 'app=1; Path=/'];
        const q = set.map((c) => `set=${encodeURIComponent(c)}`).join('&');
        const r = await send(`/none/x?${q}`, []);
        expect(r.status).toBe(200);
        expect(r.headers['set-cookie']).toBe('app=1; Path=/');
      }),
      { numRuns: 25 },
    );
  });

  it('Authorization: never a Gatehouse key in any mode; in optional and required only the synthetic header', async () => {
    const key = w.userKey;
    const b64 = (s: string, url: boolean) =>
      url ? Buffer.from(s).toString('base64url') : Buffer.from(s).toString('base64');
    const holdsKey = fc.oneof(
      fc
        .tuple(anyCase('bearer'), fc.constantFrom(' ', '  ', '\t'), fc.constantFrom('', ' '))
        .map(([s, a, z]) => `${s}${a}${key}${z}`),
      fc
        .tuple(
          anyCase('basic'),
          fc.constantFrom(`${key}:`, `me:${key}`, `${key}:pw`, key, `:${key}`),
          fc.boolean(),
        )
        .map(([s, cred, url]) => `${s} ${b64(cred, url)}`),
      fc.constantFrom(`Token ${key}`, key, `Digest username="${key}"`),
    );
    const foreign = fc.oneof(
      fc
        .tuple(fc.stringMatching(/^[a-z]{1,8}$/), fc.stringMatching(/^[a-z0-9]{0,8}$/))
        .map(([u, pw]) => basic(`${u}@example.com`, pw)),
      fc.stringMatching(/^[A-Za-z0-9_-]{10,40}$/).map((t) => `Bearer ey${t}.ey${t}.sig`),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Mode>('none', 'optional'),
        fc.oneof(
          holdsKey.map((v) => ({ v, key: true })),
          foreign.map((v) => ({ v, key: false })),
        ),
        async (mode, { v, key: isKey }) => {
          const r = await send(MODES[mode], [`Authorization: ${v}`]);
          if (r.status === 401) return void expect(mode).toBe('optional'); // a key form refused as a credential
          expect(r.status).toBe(200);
          const seen = r.seen as Seen;
          expect(JSON.stringify(seen)).not.toContain(key);
          const auth = pairs(seen)
            .map(([n, value]) => [n?.toLowerCase(), value])
            .filter(([n]) => n === 'authorization');
          const identified = pairs(seen).some(([n]) => n === 'x-service-user');
          if (identified) expect(auth).toEqual([['authorization', basic(w.user.email, '')]]);
          else if (mode === 'none' && !isKey) expect(auth).toEqual([['authorization', v]]);
          else expect(auth).toEqual([]);
        },
      ),
      { numRuns: 60 },
    );
    // A client-made "synthetic" header in optional mode without credentials does not reach the app.
    const fake = await send(MODES.optional, [`Authorization: ${basic('bob@example.com', '')}`]);
    expect(pairs(fake.seen as Seen).filter(([n]) => n?.toLowerCase() === 'authorization')).toEqual([]);
  });

  it('a Gatehouse key in the query is refused, in every mode and encoding, before it reaches the upstream', async () => {
    const pct = (s: string) =>
      fc
        .array(fc.boolean(), { minLength: s.length, maxLength: s.length })
        .map((enc) =>
          [...s].map((c, i) => (enc[i] ? `%${c.charCodeAt(0).toString(16).padStart(2, '0')}` : c)).join(''),
        );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Mode>('none', 'optional', 'required'),
        pct('access_token'),
        pct(w.userKey),
        fc.constantFrom('', 'a=1&', 'x=y&z=1&'),
        async (mode, name, value, before) => {
          const r = await send(`${MODES[mode]}?${before}${name}=${value}`, [
            `Authorization: Bearer ${w.userKey}`,
          ]);
          expect(r.status).toBe(400);
        },
      ),
      { numRuns: 30 },
    );
    const other = await send(`${MODES.none}?access_token=an-app-token`, []);
    expect(other.status).toBe(200);
  });
});

describe.each(backends())("the service's cookies over TLS (%s)", (backend) => {
  let s: TestService;
  const tls = { 'x-forwarded-proto': 'https' };
  beforeAll(async () => {
    s = await startTestService(backend, { SVC_SERVER_TRUSTPROXY: '127.0.0.1' });
    await makeUser(s, { email: 'tls@example.com', password: 'a long enough password 2' });
  });
  afterAll(async () => s?.close());

  it('are __Host- prefixed (Secure, Path=/, no Domain) and only the prefixed names count over TLS', async () => {
    const b = new Browser(s);
    const e = await b.req({
      method: 'POST',
      url: '/auth/email',
      form: { email: 'tls@example.com' },
      headers: tls,
    });
    expect(e.statusCode).toBe(204);
    const pw = await b.req({
      method: 'POST',
      url: '/auth/password',
      form: { password: 'a long enough password 2' },
      headers: tls,
    });
    expect(pw.statusCode).toBe(204);
    const set = [e, pw]
      .flatMap((r) => ([] as (string | undefined)[]).concat(r.headers['set-cookie']))
      .filter((c): c is string => !!c);
    for (const c of set) {
      expect(c).toMatch(/^__Host-gatehouse_(session|device)=/);
      expect(c).toMatch(/; Secure/);
      expect(c).toMatch(/; Path=\//);
      expect(c).not.toMatch(/Domain=/i);
    }
    const token = b.cookies.get('__Host-gatehouse_session') as string;
    expect(token).toBeTruthy();
    const me = (cookie: string, headers: Record<string, string> = {}, ip = '127.0.0.1') =>
      s.app.inject({ method: 'GET', url: '/users/me', headers: { cookie, ...headers }, remoteAddress: ip });
    expect((await me(`__Host-gatehouse_session=${token}`, tls)).statusCode).toBe(200);
    // Over TLS the plain name is not read (it may have been planted by a sibling host) ...
    expect((await me(`gatehouse_session=${token}`, tls)).statusCode).toBe(401);
    // ... and over plain HTTP, or when an untrusted client claims https, the prefixed one is not.
    expect((await me(`__Host-gatehouse_session=${token}`)).statusCode).toBe(401);
    expect((await me(`__Host-gatehouse_session=${token}`, tls, '10.9.8.7')).statusCode).toBe(401);
    // Plain HTTP (development) keeps the plain names.
    const plain = await signedIn(s, 'tls@example.com', 'a long enough password 2');
    expect(plain.session).toBeTruthy();
  });
});
