import type { Doc } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { parseListQuery, type RawListQuery } from './listquery.js';
import type { ObjectStore } from './objects.js';

/** Field values to match exactly: `{ UserID: id, State: 'active' }`. */
export type Where = Record<string, string | boolean | number>;

/** The list filter expressions for `where` (values are JSON-quoted, so no value can inject syntax). */
export function filtersOf(where: Where): string[] {
  return Object.entries(where).map(([field, v]) => `${field} = ${JSON.stringify(v)}`);
}

/** Every object a list query (the API's filter, order and limit options) selects, as parsed documents. */
export async function* iterateQuery(
  store: ObjectStore,
  type: ObjectType,
  raw: RawListQuery,
): AsyncGenerator<Doc> {
  const page = await store.list(type, parseListQuery(type, raw));
  for await (const chunk of page.chunks)
    for (const line of chunk.split('\n')) if (line !== '') yield (JSON.parse(line) as { Item: Doc }).Item;
}

/**
 * Every object of `type` matching `where`, in `order` (oldest ID first by default), as parsed
 * documents streamed from the database: the one typed way features read sets of objects (no
 * feature parses JSON lines or writes filter strings by hand).
 */
export const iterateWhere = (
  store: ObjectStore,
  type: ObjectType,
  where: Where = {},
  order: readonly string[] = ['ID'],
): AsyncGenerator<Doc> => iterateQuery(store, type, { filter: filtersOf(where), order: [...order] });

/** iterateWhere, collected. */
export async function findWhere(store: ObjectStore, type: ObjectType, where: Where = {}): Promise<Doc[]> {
  const out: Doc[] = [];
  for await (const doc of iterateWhere(store, type, where)) out.push(doc);
  return out;
}
