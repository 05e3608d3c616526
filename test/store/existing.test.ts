import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Group } from '../../src/objects/group.js';
import { User } from '../../src/objects/user.js';
import { newId } from '../../src/store/objects.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { newUserWith } from '../kit/index.js';

/* ObjectStore.existing: which of many IDs are objects of a type, across its 500-ID statements. */
describe.each(backends())('ObjectStore.existing (%s)', (backend) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startTestService(backend);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('names exactly the IDs that exist as that type, however many are asked', async () => {
    const users: string[] = [];
    for (let i = 0; i < 6; i++) users.push(await newUserWith(s, { Email: `exists${i}@example.com` }));
    const group = String(
      (await s.req({ method: 'POST', url: '/groups', payload: { Name: 'existing-g' } })).headers['x-id'],
    );
    const unknown = Array.from({ length: 1200 }, () => newId());
    // Spread the real ones over the statements: first, across a boundary, last.
    const ids = [
      users[0],
      ...unknown.slice(0, 499),
      users[1],
      users[2],
      ...unknown.slice(499),
      group,
      users[3],
      users[4],
      users[5],
    ] as string[];
    expect([...(await s.store.existing(User, ids))].sort()).toEqual([...users].sort());
    expect([...(await s.store.existing(Group, ids))]).toEqual([group]);
    expect((await s.store.existing(User, [])).size).toBe(0);
  });
});
