import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectTypes } from '../../src/objects/registry.js';
import { startTestService, type TestService } from '../helpers.js';

describe('GET /openapi.json', () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService('sqlite');
  });
  afterAll(async () => s?.close());

  it('describes every type, its fields and exactly its operations, without credentials', async () => {
    const res = await s.req({ method: 'GET', url: '/openapi.json', key: '' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe('3.1.0');
    for (const type of objectTypes) {
      expect(Object.keys(doc.components.schemas[type.kind].properties)).toEqual(Object.keys(type.fields));
      const base = `/${type.path}`;
      const methods = (path: string) => Object.keys(doc.paths[path] ?? {}).filter((k) => k !== 'parameters');
      const expected = new Set<string>();
      if (type.identity === 'singleton') {
        if (type.ops.includes('get')) expected.add(`${base} get`);
        if (type.ops.includes('update')) expected.add(`${base} put`).add(`${base} patch`);
      } else {
        if (type.ops.includes('list')) expected.add(`${base} get`);
        if (type.ops.includes('create'))
          expected.add(type.identity === 'named' ? `${base}/{id} post` : `${base} post`);
        if (type.ops.includes('get')) expected.add(`${base}/{id} get`);
        if (type.ops.includes('update')) expected.add(`${base}/{id} put`).add(`${base}/{id} patch`);
        if (type.ops.includes('delete')) expected.add(`${base}/{id} delete`);
      }
      const listed = new Set([
        ...methods(base).map((m) => `${base} ${m}`),
        ...methods(`${base}/{id}`).map((m) => `${base}/{id} ${m}`),
      ]);
      expect(listed, type.kind).toEqual(expected);
    }
    expect(doc.components.schemas.User.properties.HavePIN.readOnly).toBe(true);
    expect(doc.components.schemas.User.properties.SuspendAfter).toMatchObject({
      type: 'string',
      format: 'date-time',
    });
  });
});
