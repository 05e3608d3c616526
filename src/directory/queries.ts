import type { Doc } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { findWhere, type Where } from '../store/find.js';
import type { ObjectStore } from '../store/objects.js';

/** Every object of `type` whose fields equal `where`'s values, oldest ID first (src/store/find.ts). */
export const allOf = (store: ObjectStore, type: ObjectType, where: Where = {}): Promise<Doc[]> =>
  findWhere(store, type, where);
