import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REPORT_COLUMNS } from '../../src/groups/report.js';
import { TRANSITIONS } from '../../src/groups/states.js';
import { docTable } from '../docs.js';

const doc = readFileSync(new URL('../../docs/groups.md', import.meta.url), 'utf8');

describe('docs/groups.md', () => {
  it('carries the transition table of src/groups/states.ts, row for row', () => {
    const rows = docTable('transitions', 'groups.md');
    const list = (c: string) => c.split(',').map((x) => x.trim());
    const documented = rows.map(([op, , by, from, to]) => ({
      op,
      by: list(by ?? ''),
      from: list(from ?? ''),
      to: (to ?? '').startsWith('(deleted)') ? 'deleted' : (to ?? '').split(' ')[0],
    }));
    expect(documented).toEqual(
      TRANSITIONS.map((t) => ({ op: t.op, by: [...t.by], from: [...t.from], to: t.to })),
    );
  });

  it('lists the report columns in order', () => {
    expect(doc).toContain(REPORT_COLUMNS.join(','));
  });
});
