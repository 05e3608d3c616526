import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { checkCsrf, ownOrigin } from '../../src/auth/session/authenticator.js';

// The service's own origin is compared with what the browser sends (Origin, return URLs) in the
// form browsers write origins: no default port, lower-case host.

const req = (protocol: string, host: string, origin?: string) =>
  ({ protocol, host, headers: origin === undefined ? {} : { origin } }) as unknown as FastifyRequest;

describe('ownOrigin', () => {
  it('writes the origin as browsers do', () => {
    expect(ownOrigin(req('http', 'Example.COM:80'))).toBe('http://example.com');
    expect(ownOrigin(req('https', 'example.com:443'))).toBe('https://example.com');
    expect(ownOrigin(req('https', 'example.com:8443'))).toBe('https://example.com:8443');
    expect(ownOrigin(req('http', '[::1]:8080'))).toBe('http://[::1]:8080');
  });
  it('is empty for a Host that is not a host, so nothing can equal it', () => {
    for (const h of ['', 'a b', 'x/y@evil.com', 'x:99999']) expect(ownOrigin(req('http', h))).toBe('');
    expect(() => checkCsrf(req('http', '', ''))).toThrow();
    expect(() => checkCsrf(req('http', 'a b', 'null'))).toThrow();
  });
  it('the CSRF check accepts this origin however the Host spells its port, and no other', () => {
    expect(() => checkCsrf(req('http', 'example.com:80', 'http://example.com'))).not.toThrow();
    expect(() => checkCsrf(req('http', 'example.com', 'http://example.com:80'))).toThrow();
    expect(() => checkCsrf(req('http', 'example.com', 'http://evil.com'))).toThrow();
    expect(() => checkCsrf(req('http', 'example.com', 'https://example.com'))).toThrow();
  });
});
