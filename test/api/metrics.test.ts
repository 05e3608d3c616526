import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectObjectCounts } from '../../src/metrics/collector.js';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';

describe.each(backends())('metrics on %s', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => s?.close());

  it('keeps a count of each type as a read-only Metric', async () => {
    await s.req({ method: 'POST', url: '/groups', payload: { Name: 'a' } });
    await s.req({ method: 'POST', url: '/groups', payload: { Name: 'b' } });
    await collectObjectCounts(s.store);
    const get = await s.req({ method: 'GET', url: '/metrics/objects.group' });
    expect(get.statusCode).toBe(200);
    expect(get.json()).toMatchObject({ ID: 'objects.group', Value: 2, Unit: 'objects' });
    const list = jsonLines((await s.req({ method: 'GET', url: '/metrics' })).body);
    expect(list.map((l) => l.ID)).toContain('objects.user');

    // Unchanged counts write nothing; a change is picked up on the next run.
    const seq = await s.store.lastSeq();
    await collectObjectCounts(s.store);
    expect(await s.store.lastSeq()).toBe(seq);
    await s.req({ method: 'POST', url: '/groups', payload: { Name: 'c' } });
    await collectObjectCounts(s.store);
    expect((await s.req({ method: 'GET', url: '/metrics/objects.group' })).json().Value).toBe(3);

    const put = await s.req({
      method: 'PUT',
      url: '/metrics/objects.group',
      payload: {},
      headers: { 'if-match': get.headers.etag as string },
    });
    expect(put.statusCode).toBe(405);
  });
});
