import type { Field, FieldMap } from '../schema/fields.js';
import { objectTypes } from './registry.js';

/**
 * Renders the field reference of every type as Markdown. docs/api.md embeds it between markers;
 * `npm run docs:fields` rewrites that part, and a test fails when the two drift apart.
 */
export function renderFieldDocs(): string {
  const out: string[] = [];
  for (const type of objectTypes) {
    const ops = type.ops.join(', ');
    const where =
      type.identity === 'singleton'
        ? `/${type.path} (singleton)`
        : type.identity === 'named'
          ? `/${type.path}/:name (the name is given in the path)`
          : `/${type.path}`;
    out.push(`### ${type.kind}`, '', `Path: \`${where}\`. Operations: ${ops}.`, '');
    out.push('| Field | Type | Default | Notes |', '|---|---|---|---|');
    const rows = (fields: FieldMap, prefix: string, writeOnly: boolean) => {
      for (const [name, field] of Object.entries(fields)) {
        out.push(
          `| ${prefix}${name} | ${typeText(field)} | ${defaultText(field)} | ${notes(field, writeOnly)} |`,
        );
        if (field.kind === 'object') rows(field.fields, `${prefix}${name}.`, writeOnly);
      }
    };
    rows(type.fields, '', false);
    if (type.writeOnly) rows(type.writeOnly, '', true);
    out.push('');
  }
  return out.join('\n');
}

function typeText(f: Field): string {
  if (f.kind === 'object') return 'object';
  if (f.kind === 'strings')
    return f.enum ? `array of ${f.enum.map((e) => `\`${e}\``).join(' / ')}` : 'array of string';
  if (f.kind === 'string' && f.enum) return f.enum.map((e) => (e === '' ? '`""`' : `\`${e}\``)).join(' / ');
  return f.kind;
}

function defaultText(f: Field): string {
  if (f.kind === 'object') return f.omitZero ? '`{}`' : 'see fields';
  if (f.kind === 'strings') return '`[]`';
  return `\`${JSON.stringify(f.default)}\``;
}

function notes(f: Field, writeOnly: boolean): string {
  const parts: string[] = [];
  if (f.readOnly) parts.push('server-managed (ignored on write)');
  if (writeOnly) parts.push('write-only (never returned)');
  if (f.kind !== 'object' && f.ref) parts.push(`ID of a ${f.ref}`);
  if (f.kind === 'string' || f.kind === 'strings') {
    if (f.maxLength !== undefined && f.maxLength < 65536) parts.push(`at most ${f.maxLength} characters`);
  }
  if ((f.kind === 'integer' || f.kind === 'number') && (f.min !== undefined || f.max !== undefined)) {
    parts.push(`${f.min ?? '…'} to ${f.max ?? '…'}`);
  }
  if (f.doc) parts.unshift(f.doc);
  return parts.join('; ');
}
