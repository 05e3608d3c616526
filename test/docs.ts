import { readFileSync } from 'node:fs';

const api = () => readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');

/** The text of docs/api.md between `<!-- name:start -->` and `<!-- name:end -->`. */
export const docSection = (name: string) =>
  api().split(`<!-- ${name}:start -->`)[1]?.split(`<!-- ${name}:end -->`)[0] ?? '';

/** The body rows of the Markdown table in a marked section, as arrays of trimmed cells. */
export function docTable(name: string): string[][] {
  return docSection(name)
    .split('\n')
    .filter((l) => l.startsWith('|') && !l.startsWith('|---'))
    .slice(1)
    .map((l) =>
      l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
}
