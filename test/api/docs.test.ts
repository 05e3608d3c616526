import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { renderFieldDocs } from '../../src/objects/docs.js';
import { objectTypes } from '../../src/objects/registry.js';
import { FIELD_RULES } from '../../src/policy/grants.js';
import { PRIVILEGE_OF } from '../../src/policy/privilege.js';
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

  it('has a field-rules row for every privilege-bearing field, with its rule (FIELD_RULES)', () => {
    const listed = docTable('field-rules')
      .map((r) => `${r[0]} ${r[1]} ${r[2]}`)
      .sort();
    const expected = Object.entries(FIELD_RULES)
      .flatMap(([kind, fields]) => Object.entries(fields).map(([name, rule]) => `${kind} ${name} ${rule}`))
      .sort();
    expect(listed).toEqual(expected);
    for (const [kind, name] of docTable('field-rules')) {
      expect(objectTypes.find((t) => t.kind === kind)?.fields, `${kind}.${name}`).toHaveProperty([
        name as string,
      ]);
    }
  });

  it('has a privileged-objects row for every type that stands for privileges (PRIVILEGE_OF)', () => {
    const listed = docTable('privileged-objects')
      .map((r) => r[0])
      .sort();
    expect(listed).toEqual(Object.keys(PRIVILEGE_OF).sort());
  });
});
