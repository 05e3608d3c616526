/**
 * A parser of the Prometheus text exposition format (version 0.0.4), written from the format's
 * description and independent of prom-client: families from # HELP / # TYPE, samples with
 * escaped label values, floats including +Inf and NaN. It throws on anything malformed.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
export interface Family {
  type: string;
  help: string;
  samples: Sample[];
}
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  const familyOf = (sample: string) => {
    for (const suffix of ['_bucket', '_sum', '_count', '']) {
      if (!sample.endsWith(suffix)) continue;
      const base = sample.slice(0, sample.length - suffix.length);
      const f = families.get(base);
      if (f && (suffix === '' || f.type === 'histogram' || f.type === 'summary')) return f;
    }
    throw new Error(`sample ${sample} has no # TYPE`);
  };
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`).exec(line);
    if (m) {
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      const f = families.get(name) ?? { type: 'untyped', help: '', samples: [] };
      if (kind === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest))
          throw new Error(`bad type ${rest}`);
        f.type = rest;
      } else f.help = rest;
      families.set(name, f);
      continue;
    }
    if (line.startsWith('#')) continue;
    m = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`).exec(line);
    if (!m) throw new Error(`malformed sample line: ${line}`);
    const [, name, labelText, valueText] = m as unknown as [string, string, string | undefined, string];
    const labels: Record<string, string> = {};
    let rest = labelText ?? '';
    while (rest !== '') {
      const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/.exec(rest);
      if (!lm) throw new Error(`malformed labels: ${labelText}`);
      labels[lm[1] as string] = (lm[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      rest = rest.slice(lm[0].length);
    }
    // Prometheus reads values with Go's ParseFloat, which takes NaN and Inf in any case
    // (prom-client writes NaN as "Nan").
    const special = valueText.toLowerCase();
    const value =
      special === '+inf' || special === 'inf'
        ? Infinity
        : special === '-inf'
          ? -Infinity
          : special === 'nan'
            ? NaN
            : Number(valueText);
    if (Number.isNaN(value) && special !== 'nan') throw new Error(`bad value ${valueText}`);
    familyOf(name).samples.push({ name, labels, value });
  }
  return families;
}

export const sum = (f: Family | undefined, name: string, match: Record<string, string>) =>
  (f?.samples ?? [])
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
