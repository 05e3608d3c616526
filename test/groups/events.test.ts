import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventClient } from '../events/client.js';
import { backends, startTestService, type TestService } from '../helpers.js';
import { create, op, person } from './fixture.js';

describe.each(backends())('membership changes on the event stream on %s', (backend) => {
  let s: TestService;
  let base: string;
  const clients: EventClient[] = [];
  beforeAll(async () => {
    s = await startTestService(backend);
    base = await s.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    for (const c of clients) c.ws.close();
    await s?.close();
  });

  it('streams requests, decisions and removals as Membership frames', async () => {
    const approver = await person(s, 'Approver');
    const alice = await person(s, 'Alice');
    const g = await create(s, 'groups', {
      Name: 'watched',
      RequiresApproval: true,
      Approvers: [approver.id],
    });
    const audit = await EventClient.open(base, await s.keyFor(['audit']));
    clients.push(audit);
    audit.send({ Kind: 'Membership' });
    await audit.caughtUp('Membership');
    const start = audit.frames.length;
    const id = `${g}.${alice.id}`;
    await op(s, 'add', g, alice.id, { key: alice.key, reason: 'please' });
    await op(s, 'approve', g, alice.id, { key: approver.key });
    await op(s, 'remove', g, alice.id);
    // requested, active, removed (who and why), then the deletion (empty item).
    await audit.until((c) => c.frames.length >= start + 4, 5000, 'four membership frames');
    const frames = audit.frames.slice(start, start + 4);
    expect(frames.map((f) => f.ID)).toEqual([id, id, id, id]);
    const states = frames.map((f) => (f.Item as { State?: string }).State ?? 'deleted');
    expect(states).toEqual(['requested', 'active', 'removed', 'deleted']);
    expect(frames[0]!.Item).toMatchObject({
      Reason: 'please',
      LastChange: { Op: 'request', ByUserID: alice.id },
    });
    expect(frames[3]!.Item).toEqual({});
  });
});
