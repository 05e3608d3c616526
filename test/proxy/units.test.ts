import { describe, expect, it } from 'vitest';
import type { AuthBackend } from '../../src/proxy/backend.js';
import { BackendError } from '../../src/proxy/backend.js';
import { readCookie, stripOwnCookies } from '../../src/proxy/cookie.js';
import { ApiKeyCache, KEY_CACHE_MS, presentedCredential } from '../../src/proxy/credentials.js';
import { requestPath, safeReturnPath } from '../../src/proxy/http.js';
import type { WireIdentity } from '../../src/wire/proxy.js';

const KEY = `gv${'a'.repeat(54)}`;
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('proxy building blocks', () => {
  it('recognises API keys in the three positions and leaves other credentials alone', () => {
    expect(presentedCredential(`Bearer ${KEY}`)).toEqual({ kind: 'key', key: KEY });
    expect(presentedCredential(`bearer   ${KEY} `)).toEqual({ kind: 'key', key: KEY });
    expect(presentedCredential(`Basic ${b64(`${KEY}:`)}`)).toEqual({ kind: 'key', key: KEY });
    expect(presentedCredential(`Basic ${b64(KEY)}`)).toEqual({ kind: 'key', key: KEY });
    expect(presentedCredential(`Basic ${b64(`me@example.com:${KEY}`)}`)).toEqual({ kind: 'key', key: KEY });
    expect(presentedCredential(`Basic ${b64(`${KEY}:secret`)}`)).toEqual({ kind: 'foreign' });
    expect(presentedCredential('Bearer some.jwt.token')).toEqual({ kind: 'foreign' });
    expect(presentedCredential(`Basic ${b64('user:pass')}`)).toEqual({ kind: 'foreign' });
    expect(presentedCredential(undefined)).toEqual({ kind: 'none' });
  });

  it('caches key validations for KEY_CACHE_MS (how long a revoked key keeps working), refusals briefly', async () => {
    let calls = 0;
    let revoked = false;
    const identity: WireIdentity = { UserID: 'u', UserName: 'u', Email: 'u@x', FullName: '' };
    const backend = {
      async apiKey() {
        calls++;
        await new Promise((r) => setTimeout(r, 10));
        if (revoked) throw new BackendError(403, 'Forbidden', 'revoked');
        return identity;
      },
    } as unknown as AuthBackend;
    expect(KEY_CACHE_MS).toBe(30_000);
    const cache = new ApiKeyCache(() => backend, 200, 100);
    // Concurrent first requests share one service call.
    await Promise.all([cache.identify(KEY), cache.identify(KEY), cache.identify(KEY)]);
    expect(calls).toBe(1);
    revoked = true;
    await expect(cache.identify(KEY)).resolves.toEqual(identity); // still cached
    expect(calls).toBe(1);
    await new Promise((r) => setTimeout(r, 220));
    await expect(cache.identify(KEY)).rejects.toThrow(/revoked/);
    await expect(cache.identify(KEY)).rejects.toThrow(/revoked/);
    expect(calls).toBe(2); // the refusal is cached too
    revoked = false;
    await new Promise((r) => setTimeout(r, 120));
    await expect(cache.identify(KEY)).resolves.toEqual(identity);
    expect(calls).toBe(3);
  });

  it('never caches outages', async () => {
    let calls = 0;
    const backend = {
      async apiKey() {
        calls++;
        throw new BackendError(503, 'Service Unavailable', 'down');
      },
    } as unknown as AuthBackend;
    const cache = new ApiKeyCache(() => backend);
    await expect(cache.identify(KEY)).rejects.toThrow();
    await expect(cache.identify(KEY)).rejects.toThrow();
    expect(calls).toBe(2);
  });

  it('normalizes request paths and refuses encoded slashes', () => {
    expect(requestPath('/a/./b/../c')).toBe('/a/c');
    expect(requestPath('/public/%2e%2E/admin')).toBe('/admin');
    expect(requestPath('/../../etc')).toBe('/etc');
    expect(requestPath('//x//y')).toBe('/x/y');
    expect(requestPath('/plain/path')).toBe('/plain/path');
    expect(() => requestPath('/a%2Fb')).toThrow();
    expect(() => requestPath('/a%5cb')).toThrow();
    expect(() => requestPath('/a\\b')).toThrow();
  });

  it("reads its own cookies, strips Gatehouse's (the gatehouse_ names); returns only to local paths", () => {
    expect(readCookie('a=1; gatehouse_proxy=tok; b=2', 'gatehouse_proxy')).toBe('tok');
    expect(readCookie('gatehouse_proxy=a; gatehouse_proxy=b', 'gatehouse_proxy')).toBeUndefined();
    expect(readCookie('gatehouse_proxy_state=a', 'gatehouse_proxy')).toBeUndefined();
    expect(stripOwnCookies('a=1; gatehouse_proxy=tok; gatehouse_proxy_state=s; b=2')).toBe('a=1; b=2');
    // The whole gatehouse_ namespace is Gatehouse's (the service's cookies too), not only the exact names.
    expect(stripOwnCookies('gatehouse_proxy_x=1; a=2')).toBe('a=2');
    expect(stripOwnCookies('gatehousex=1; my_gatehouse_y=2')).toBe('gatehousex=1; my_gatehouse_y=2');
    expect(stripOwnCookies('gatehouse_proxy=tok')).toBeUndefined();
    expect(safeReturnPath('/x?y=1')).toBe('/x?y=1');
    expect(safeReturnPath('//evil.example/x')).toBe('/');
    expect(safeReturnPath('https://evil.example/')).toBe('/');
    expect(safeReturnPath('/\\evil.example')).toBe('/');
  });
});
