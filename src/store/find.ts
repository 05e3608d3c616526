import type { Doc } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { parseListQuery } from './listquery.js';
import type { ObjectStore } from './objects.js';

/** Field values to match exactly: `{ UserID: id, State: 'active' }`. */
export type Where = Record<string, string | boolean | number>;

/** The list filter expressions for `where` (values are JSON-quoted, so no value can inject syntax). */
export function filtersOf(where: Where): string[] {
  return Object.entries(where).map(([field, v]) => `${field} = ${JSON.stringify(v)}`);
}

/**
 * Every object of `type` matching `where`, oldest ID first, as parsed documents: the one typed way
 * features read sets of objects (no feature parses JSON lines or writes filter strings by hand).
 */
export async function* iterateWhere(
  store: ObjectStore,
  type: ObjectType,
  where: Where = {},
): AsyncGenerator<Doc> {
  const page = await store.list(type, parseListQuery(type, { filter: filtersOf(where), order: ['ID'] }));
  for await (const chunk of page.chunks)
    for (const line of chunk.split('\n')) if (line !== '') yield (JSON.parse(line) as { Item: Doc }).Item;
}

/** iterateWhere, collected. */
export async function findWhere(store: ObjectStore, type: ObjectType, where: Where = {}): Promise<Doc[]> {
  const out: Doc[] = [];
  for await (const doc of iterateWhere(store, type, where)) out.push(doc);
  return out;
}
