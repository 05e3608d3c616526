import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROXY_ERRORS } from '../../src/proxy/errorcodes.js';
import { docTable } from '../docs.js';

const PROXY_SRC = new URL('../../src/proxy/', import.meta.url).pathname;

/** Every .ts file under src/proxy, with its text. */
function proxySources(dir = PROXY_SRC): { file: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? proxySources(join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [{ file: join(dir, e.name).slice(PROXY_SRC.length), text: readFileSync(join(dir, e.name), 'utf8') }]
        : [],
  );
}

describe("the proxy's error table (src/proxy/errorcodes.ts)", () => {
  const entries = Object.values(PROXY_ERRORS);

  it('has every status and code listed in docs/api.md, and nothing listed that it lacks', () => {
    const rows = docTable('proxy-errors');
    expect(rows.length).toBeGreaterThan(0);
    for (const { status, code } of entries)
      expect(rows, `${status} ${code}`).toContainEqual([String(status), code, expect.any(String)]);
    for (const [status, code] of rows)
      expect(
        entries.some((e) => String(e.status) === status && e.code === code),
        `${status} ${code}`,
      ).toBe(true);
  });

  it('is the only place in src/proxy that makes an error from a literal status or phrase', () => {
    const sources = proxySources();
    expect(sources.length).toBeGreaterThan(20);
    const offenders: string[] = [];
    for (const { file, text } of sources) {
      // `new HttpError(` with a literal status or message, anywhere; outside the table, at all.
      for (const m of text.matchAll(/new HttpError\(([^;]*?)\)/gs)) {
        const args = m[1] ?? '';
        if (file !== 'errorcodes.ts' || /^\s*\d|['"`]/.test(args)) offenders.push(`${file}: ${m[0]}`);
      }
      // An outcome or answer with a literal X-Error-Code phrase.
      if (file === 'errorcodes.ts') continue;
      for (const m of text.matchAll(/\bcode:\s*['"`][^'"`]*['"`]/g)) offenders.push(`${file}: ${m[0]}`);
      for (const m of text.matchAll(/x-error-code:\s*[A-Z]/gi)) offenders.push(`${file}: ${m[0]}`);
    }
    expect(offenders).toEqual([]);
  });

  it('gives each kind a message and a status the code belongs to', () => {
    const statusOf = new Map<string, Set<number>>();
    for (const { status, code, message } of entries) {
      expect(typeof message === 'string' ? message : message('x')).not.toBe('');
      statusOf.set(code, (statusOf.get(code) ?? new Set()).add(status));
    }
    // One code, one status: a client reading the code knows the status.
    for (const [code, statuses] of statusOf) expect([code, statuses.size]).toEqual([code, 1]);
  });
});
