// Rewrites the field reference in docs/api.md from the type declarations (run `npm run build` first).
import { readFileSync, writeFileSync } from 'node:fs';
import { renderFieldDocs } from '../dist/objects/docs.js';

const path = new URL('../docs/api.md', import.meta.url);
const doc = readFileSync(path, 'utf8');
const start = '<!-- fields:start -->';
const end = '<!-- fields:end -->';
const [head, rest] = doc.split(start);
const tail = rest?.split(end)[1];
if (tail === undefined) throw new Error('docs/api.md lacks the fields markers');
writeFileSync(path, `${head}${start}\n${renderFieldDocs()}\n${end}${tail}`);
