import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/api/errors.js';
import { renderFieldDocs } from '../../src/objects/docs.js';
import { objectTypes } from '../../src/objects/registry.js';
import { docSection, docTable } from '../docs.js';

describe('docs/api.md', () => {
  it('has the field reference generated from the type declarations (npm run docs:fields)', () => {
    expect(docSection('fields').trim()).toBe(renderFieldDocs().trim());
  });

  it('lists every error code with its status', () => {
    const rows = docTable('errors');
    for (const { status, code } of Object.values(ErrorCodes)) {
      expect(rows, code).toContainEqual([String(status), code, expect.any(String)]);
    }
  });

  it('has a permission row for every operation of every type', () => {
    const rows = docTable('permissions');
    const listed = rows.map((r) => `${r[0]} ${r[1]}`).sort();
    const expected = objectTypes.flatMap((t) => t.ops.map((op) => `${t.kind} ${op}`)).sort();
    expect(listed).toEqual(expected);
  });
});
