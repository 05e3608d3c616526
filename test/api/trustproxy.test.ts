import { describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/index.js';
import { startTestService } from '../helpers.js';

const ipsLogged = (logs: string[]) =>
  logs
    .map((l) => JSON.parse(l) as { msg: string; ip?: string })
    .filter((l) => l.msg === 'request')
    .map((l) => l.ip);

describe('server.trustproxy', () => {
  it('believes X-Forwarded-For only from the listed proxies', async () => {
    const trusting = await startTestService('sqlite', { SVC_SERVER_TRUSTPROXY: '10.0.0.0/8, 127.0.0.1' });
    try {
      await trusting.app.inject({
        method: 'GET',
        url: '/healthz',
        remoteAddress: '127.0.0.1',
        headers: { 'x-forwarded-for': '203.0.113.9' },
      });
      await trusting.app.inject({
        method: 'GET',
        url: '/healthz',
        remoteAddress: '192.0.2.1',
        headers: { 'x-forwarded-for': '203.0.113.9' },
      });
      expect(ipsLogged(trusting.logs)).toEqual(['203.0.113.9', '192.0.2.1']);
    } finally {
      await trusting.close();
    }
    const plain = await startTestService('sqlite');
    try {
      await plain.app.inject({
        method: 'GET',
        url: '/healthz',
        remoteAddress: '127.0.0.1',
        headers: { 'x-forwarded-for': '203.0.113.9' },
      });
      expect(ipsLogged(plain.logs)).toEqual(['127.0.0.1']);
    } finally {
      await plain.close();
    }
  });

  it('refuses entries that are not addresses or CIDRs, naming the key', () => {
    for (const bad of ['example.com', '10.0.0.0/33', '::1/129', '1.2.3.4/8/9']) {
      expect(() => loadServiceConfig({ env: { SVC_SERVER_TRUSTPROXY: bad } }), bad).toThrow(
        /server\.trustproxy/,
      );
    }
    expect(loadServiceConfig({ env: { SVC_SERVER_TRUSTPROXY: '::1, 10.1.0.0/16' } }).server.trustproxy).toBe(
      '::1, 10.1.0.0/16',
    );
  });
});
