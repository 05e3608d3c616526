import type { FastifyInstance } from 'fastify';
import { ApiError } from '../core/errors.js';
import { err, type RouteSchema, ref } from '../core/routeschema.js';
import { User } from '../objects/user.js';
import type { ServiceContext } from '../store/service.js';
import { principalOf, sendObject } from './objects.js';

/** User endpoints beyond CRUD. Literal paths are registered before /users/:id matches them. */
export function registerUserRoutes(app: FastifyInstance, { store }: ServiceContext) {
  app.get('/users/me', { schema: ME }, async (req, reply) => {
    const p = principalOf(req);
    const obj = p.userId === '' ? undefined : await store.get(User, p.userId);
    if (!obj) throw new ApiError('NotFound', 'these credentials belong to no user');
    return sendObject(req, reply, User, obj);
  });
}

const ME: RouteSchema = {
  tags: ['User'],
  summary: 'The user the credentials belong to',
  response: {
    200: { description: 'The user', content: { 'application/json': { schema: ref('User') } } },
    404: err('The credentials belong to no user'),
  },
};
