import type { Doc } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { parseListQuery } from '../store/listquery.js';
import type { ObjectStore } from '../store/objects.js';

/** Every object of `type` matching the filter expressions (field = JSON value), as docs. */
export async function allOf(store: ObjectStore, type: ObjectType, filters: string[] = []): Promise<Doc[]> {
  const page = await store.list(type, parseListQuery(type, { filter: filters, order: ['ID'] }));
  const out: Doc[] = [];
  for await (const chunk of page.chunks)
    for (const line of chunk.split('\n')) if (line !== '') out.push(JSON.parse(line).Item as Doc);
  return out;
}

export const eq = (field: string, value: string | boolean) => `${field} = ${JSON.stringify(value)}`;
