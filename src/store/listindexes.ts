/**
 * Indexes that give a list its order. The fields each type keeps unique (User Email and UserName;
 * App and Group Name) are what people find and sort a list by; without an index, a list ordered by
 * one of them read and sorted every object of the type for each page (on SQLite on the event loop,
 * so every other request waited). Each index is partial, on one type, and its expression is the
 * list query's own (`fieldExpr` in listread.ts; test/store/listindex.test.ts checks the plans).
 * An index added later goes at the end, with the migration that creates it.
 */
export interface ListIndex {
  name: string;
  /** The object type (`objects.type`). */
  type: string;
  /** The field's path, as in `order=`. */
  path: string;
  /** The migration that creates it (src/store/migrations.ts). */
  migration: string;
}

export const LIST_INDEXES: readonly ListIndex[] = [
  { name: 'objects_user_email', type: 'User', path: 'Email', migration: '0012_list_indexes' },
  { name: 'objects_user_username', type: 'User', path: 'UserName', migration: '0012_list_indexes' },
  { name: 'objects_app_name', type: 'App', path: 'Name', migration: '0012_list_indexes' },
  { name: 'objects_group_name', type: 'Group', path: 'Name', migration: '0012_list_indexes' },
];

/** The index ordering objects of `type` by `path`, if there is one. */
export const listIndexFor = (type: string, path: string): ListIndex | undefined =>
  LIST_INDEXES.find((i) => i.type === type && i.path === path);
