import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { AnswerHooks } from '../../src/api/answerhooks.js';

describe('answer hooks: one onSend and one onResponse for every feature', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => app?.close());

  const make = () => {
    const a = Fastify();
    const hooks = new AnswerHooks(a);
    a.get('/x', async () => ({ ok: true }));
    app = a;
    return { app: a, hooks };
  };

  it('run in the order added, wait for a promise before the next, then send the payload', async () => {
    const { app, hooks } = make();
    const order: string[] = [];
    hooks.beforeSend((_req, reply) => {
      order.push('first');
      reply.header('x-first', '1');
    });
    hooks.beforeSend(async (_req, reply) => {
      await new Promise((r) => setTimeout(r, 20));
      order.push('slow');
      reply.header('x-slow', '1');
    });
    hooks.beforeSend((_req, reply) => {
      order.push('last');
      reply.header('x-last', String(order.length));
    });
    const done: string[] = [];
    hooks.afterResponse((_req, reply) => done.push(`after ${reply.statusCode}`));
    const res = await app.inject({ method: 'GET', url: '/x' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    expect(order).toEqual(['first', 'slow', 'last']);
    expect(res.headers).toMatchObject({ 'x-first': '1', 'x-slow': '1', 'x-last': '3' });
    expect(done).toEqual(['after 200']);
  });

  it('a throw or a rejection stops the walk and becomes the error answer', async () => {
    for (const failing of [
      () => {
        throw new Error('sync');
      },
      async () => {
        throw new Error('async');
      },
    ]) {
      const { app, hooks } = make();
      let later = false;
      hooks.beforeSend(failing);
      hooks.beforeSend(() => {
        later = true;
      });
      const res = await app.inject({ method: 'GET', url: '/x' });
      expect(res.statusCode).toBe(500);
      expect(later).toBe(false);
      await app.close();
    }
  });
});
