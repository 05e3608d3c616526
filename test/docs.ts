import { readFileSync } from 'node:fs';

const read = (file: string) => readFileSync(new URL(`../docs/${file}`, import.meta.url), 'utf8');

/** The text of docs/<file> between `<!-- name:start -->` and `<!-- name:end -->`. */
export const docSection = (name: string, file = 'api.md') =>
  read(file).split(`<!-- ${name}:start -->`)[1]?.split(`<!-- ${name}:end -->`)[0] ?? '';

/** The body rows of the Markdown table in a marked section, as arrays of trimmed cells. */
export function docTable(name: string, file = 'api.md'): string[][] {
  return docSection(name, file)
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
