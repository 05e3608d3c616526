import type { FastifyReply } from 'fastify';
import { httpDate } from '../core/httpdate.js';
import type { ObjectType } from '../schema/type.js';
import type { StoredObject } from '../store/objects.js';

/** The URI of an object: /<type>/<id>, or /tenant for the singleton. */
export const locationOf = (type: ObjectType, id: string) =>
  type.identity === 'singleton' ? `/${type.path}` : `/${type.path}/${encodeURIComponent(id)}`;

/** The headers every single-object response carries (spec: Etag, X-Id, Location, X-Create-Time, Last-Modified). */
export function setObjectHeaders(reply: FastifyReply, type: ObjectType, obj: StoredObject): FastifyReply {
  reply.header('Etag', obj.etag);
  if (type.identity !== 'singleton') reply.header('X-Id', obj.id);
  reply.header('Location', locationOf(type, obj.id));
  reply.header('X-Create-Time', httpDate(obj.createTime));
  reply.header('Last-Modified', httpDate(obj.modifyTime));
  reply.header('Cache-Control', 'private, max-age=0');
  reply.header('Expires', '-1');
  return reply;
}

/** One header value, refusing repeated headers where only one makes sense. */
export function singleHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
