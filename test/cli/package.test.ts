import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The package as an operator installs it (issue 28): `npm pack` gives a tarball, `npm install -g`
 * installs it (into a temporary prefix here, never the real global one), and then `gatehouse
 * --version` and `gatehouse serve` work from a directory that has nothing to do with the
 * checkout. The install fetches the dependencies from the npm registry (or npm's cache) and
 * builds better-sqlite3, so it takes minutes.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; name: string };
const work = mkdtempSync(join(tmpdir(), 'gatehouse-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const run = (cmd: string, args: string[], cwd: string, timeout = 60_000) =>
  spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    timeout,
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });

describe('npm pack and npm install -g', () => {
  it('installs a gatehouse command that runs --version and serve from any directory', async () => {
    // dist/ is built by `npm test` before Vitest runs; packing without scripts does not rebuild it
    // under the other tests that run dist/cli/main.js at the same time.
    expect(existsSync(join(ROOT, 'dist/cli/main.js')), 'build first (npm run build)').toBe(true);
    const packed = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT);
    expect(packed.status, packed.stderr).toBe(0);
    const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    const files = (info?.files ?? []).map((f) => f.path);
    expect(files).toContain('LICENSE');
    expect(files).toContain('dist/cli/main.js');
    expect(files).toContain('docs/operations.md');
    expect(files.filter((f) => /^(test|src|node_modules|data)\/|\.db$/.test(f))).toEqual([]);
    const tarball = join(work, info?.filename as string);

    const prefix = join(work, 'prefix');
    const install = run(
      'npm',
      ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball],
      work,
      900_000,
    );
    expect(install.status, `${install.stdout}\n${install.stderr}`).toBe(0);
    const bin = join(prefix, 'bin', 'gatehouse');
    expect(existsSync(bin)).toBe(true);

    const elsewhere = mkdtempSync(join(tmpdir(), 'gatehouse-elsewhere-'));
    const version = run(bin, ['--version'], elsewhere);
    expect(version.status, version.stderr).toBe(0);
    expect(version.stdout).toBe(`${pkg.version}\n`);

    // serve: its default database (./data/gatehouse.db) is made in the working directory.
    const proc = spawn(bin, ['serve', '--listen', '127.0.0.1:0'], { cwd: elsewhere });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 60_000);
        proc.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /"url":"([^"]+)"[^\n]*"msg":"gatehouse listening"/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(m[1] as string);
          }
        });
        proc.stderr.on('data', (d: Buffer) => {
          out += d.toString();
        });
        proc.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
      });
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      const index = (await (await fetch(`${url}/`)).json()) as { Version?: string };
      expect(index.Version).toBe(pkg.version);
      expect(existsSync(join(elsewhere, 'data', 'gatehouse.db'))).toBe(true);
    } finally {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
      rmSync(elsewhere, { recursive: true, force: true });
    }
  }, 1_000_000);
});
