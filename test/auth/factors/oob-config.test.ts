import { describe, expect, it } from 'vitest';
import { allowedEndpoint } from '../../../src/auth/factors/mobile/sender.js';
import { linkBase } from '../../../src/auth/factors/otp/message.js';
import { loadServiceConfig } from '../../../src/config/index.js';
import type { ServiceContext } from '../../../src/store/service.js';

const load = (env: Record<string, string>) => loadServiceConfig({ env });
const base = (env: Record<string, string>, tenant: Record<string, unknown> = {}) =>
  linkBase({ config: load(env) } as unknown as ServiceContext, tenant);

/** The [mail], [pstn] and [push] settings, and where sign-in links point. */
describe('settings of the out-of-band factors', () => {
  it('refuses bad values naming the key', () => {
    expect(() => load({ SVC_MAIL_PORT: '70000' })).toThrow(/mail\.port/);
    expect(() => load({ SVC_MAIL_TLS: 'maybe' })).toThrow(/mail\.tls/);
    expect(() => load({ SVC_PSTN_PROVIDER: 'carrier-pigeon' })).toThrow(/pstn\.provider/);
    expect(() => load({ SVC_PSTN_BASEURL: 'ftp://x' })).toThrow(/pstn\.baseurl/);
    expect(() => load({ SVC_PUSH_ENDPOINTS: 'https://ok.example,not an origin' })).toThrow(/push\.endpoints/);
    expect(load({}).mail).toMatchObject({ host: '', port: 587, tls: 'starttls', folder: './data/mail' });
  });

  it('links point at the configured sign-in pages, never at a name from the request', () => {
    expect(base({}, { SigninURL: 'https://login.example.com/signin/' })).toBe(
      'https://login.example.com/signin',
    );
    expect(base({ SVC_SERVER_SIGNINURL: 'https://a.example/signin' })).toBe('https://a.example/signin');
    expect(base({ SVC_SERVER_PUBLICURL: 'https://id.example.com' })).toBe('https://id.example.com/signin');
    expect(base({ SVC_SERVER_LISTEN: '127.0.0.1:9999' })).toBe('http://127.0.0.1:9999/signin');
    expect(base({ SVC_SERVER_LISTEN: ':9999' })).toBe('http://localhost:9999/signin');
  });

  it('push endpoints: only the listed services, exactly or as subdomains of a *. entry', () => {
    const list = 'https://fcm.googleapis.com,https://*.notify.windows.com';
    expect(allowedEndpoint(list, 'https://fcm.googleapis.com/fcm/send/abc')).toBe(true);
    expect(allowedEndpoint(list, 'https://db5.notify.windows.com/w/?token=x')).toBe(true);
    for (const bad of [
      'https://notify.windows.com/w',
      'https://fcm.googleapis.com.evil.example/x',
      'http://fcm.googleapis.com/x',
      'https://user:pw@fcm.googleapis.com/x',
      'https://fcm.googleapis.com:444/x',
      'https://evilnotify.windows.com/x',
      'javascript:alert(1)',
      'not a url',
    ])
      expect(allowedEndpoint(list, bad), bad).toBe(false);
  });
});
