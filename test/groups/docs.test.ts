import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REPORT_COLUMNS } from '../../src/groups/report.js';
import { TRANSITIONS } from '../../src/groups/states.js';

const doc = readFileSync(new URL('../../docs/groups.md', import.meta.url), 'utf8');

describe('docs/groups.md', () => {
  it('carries the transition table of src/groups/states.ts, row for row', () => {
    const section = doc.split('<!-- transitions:start -->')[1]?.split('<!-- transitions:end -->')[0] ?? '';
    const rows = section
      .split('\n')
      .filter((l) => l.startsWith('|') && !l.startsWith('|---'))
      .slice(1)
      .map((l) =>
        l
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim()),
      );
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
