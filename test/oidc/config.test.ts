import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/index.js';
import { issuerOf } from '../../src/oidc/provider.js';

const load = (env: Record<string, string>) => loadServiceConfig({ env });

describe('server.publicurl and server.oidckey', () => {
  it('the issuer is the public origin + /oidc; without one, the listen address', () => {
    expect(issuerOf(load({ SVC_SERVER_PUBLICURL: 'https://id.example.com' }))).toBe(
      'https://id.example.com/oidc',
    );
    expect(issuerOf(load({ SVC_SERVER_PUBLICURL: 'https://id.example.com/' }))).toBe(
      'https://id.example.com/oidc',
    );
    expect(issuerOf(load({ SVC_SERVER_LISTEN: '127.0.0.1:9999' }))).toBe('http://127.0.0.1:9999/oidc');
  });

  it('refuses a public URL with a path, query, fragment, credentials or another scheme', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('/gatehouse', '/?x=1', '/#f', '/a/b/'),
        fc.constantFrom('https://id.example.com', 'http://127.0.0.1:8080'),
        (tail, origin) => {
          expect(() => load({ SVC_SERVER_PUBLICURL: `${origin}${tail}` })).toThrow(/publicurl/);
        },
      ),
    );
    for (const bad of ['ftp://id.example.com', 'https://u:p@id.example.com', 'not a url'])
      expect(() => load({ SVC_SERVER_PUBLICURL: bad })).toThrow();
  });

  it('takes a key-encryption key of exactly 32 bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 64 }), (bytes) => {
        const v = Buffer.from(bytes).toString('base64');
        if (bytes.length === 32) expect(load({ SVC_SERVER_OIDCKEY: v }).server.oidckey).toBe(v);
        else if (v !== '') expect(() => load({ SVC_SERVER_OIDCKEY: v })).toThrow(/oidckey/);
      }),
    );
  });
});
