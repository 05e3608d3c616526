// Formatting of benchmark results as markdown.

const n = (x, digits = 0) =>
  x === undefined || x === null || Number.isNaN(x)
    ? 'n/a'
    : Number(x).toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/**
 * A markdown table with one row per metric and one column per backend, plus the target and
 * whether the first column (the backend the targets are set for) meets it.
 * rows: [{ label, unit, target: { text, ok(value) }, values: { backend: number }, digits }]
 */
export function markdownTable(backends, rows) {
  const head = ['Scenario', 'Metric', ...backends.map((b) => b.title), 'Target'];
  const out = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows) {
    const cells = backends.map((b) => {
      const v = r.values[b.name];
      if (v === undefined) return 'n/a';
      const text = typeof v === 'string' ? v : `${n(v, r.digits ?? 0)}${r.unit ? ` ${r.unit}` : ''}`;
      if (!r.target || typeof v !== 'number') return text;
      return `${text} ${r.target.ok(v) ? '✅' : '❌'}`;
    });
    out.push(`| ${r.scenario} | ${r.metric} | ${cells.join(' | ')} | ${r.target?.text ?? ''} |`);
  }
  return out.join('\n');
}

export const fmt = n;
