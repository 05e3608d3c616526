/**
 * Runs the README as a newcomer would: every fenced bash block right after a line
 * `<!-- readme-test: <name> -->` is run, in document order, in one `bash -e -o pipefail`, with the
 * text as written. Only the environment differs from a newcomer's shell:
 *
 * - the working directory is a scratch directory holding a link to the built `dist/` (so the
 *   service's ./data/ lands there, not in the project's);
 * - free ports in API/SVC_SERVER_LISTEN (the service), PROXY_PORT and DEMO_PORT, which the README
 *   reads with defaults (`API=${API:-http://127.0.0.1:8080}`);
 * - `npx gatehouse` is a stand-in for what npx runs in the project's directory (`node
 *   dist/cli/main.js`), so that npx never looks anything up in the registry; that the real
 *   `npx gatehouse` works in the project's directory is checked separately.
 *
 * Before the `stop` block the script pauses; the test then signs in through the proxy in headless
 * Chromium as the README tells a reader to do in a browser, and lets the script finish. Every
 * process the blocks start is in the script's process group, killed at the end whatever happens.
 *
 * Needs bash, curl, awk, sed and a build (`npm run build`; `npm test` builds first). Missing tools
 * (and Chromium, for the browser step) skip with a printed reason locally, and fail under CI=true.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../net.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README = join(ROOT, 'README.md');
const CLI = join(ROOT, 'dist/cli/main.js');
const MARKER = /^<!-- readme-test: ([a-z0-9-]+) -->$/;

/** The blocks run, in this order: a marker removed by mistake fails the test. */
const EXPECTED_BLOCKS = ['start', 'walkthrough', 'signin', 'apikey', 'proxy', 'stop'];

const TOOLS = ['bash', 'curl', 'awk', 'sed', 'tr'];
const missingTools = TOOLS.filter(
  (t) => spawnSync('sh', ['-c', `command -v ${t}`], { encoding: 'utf8' }).status !== 0,
);
const haveBuild = existsSync(CLI);
const skipReason = missingTools.length
  ? `${missingTools.join(', ')} not found`
  : haveBuild
    ? ''
    : `${CLI} not found (run npm run build)`;
if (skipReason) {
  if (process.env.CI === 'true') throw new Error(`README test: ${skipReason}, and CI=true: install it`);
  process.stdout.write(`\n*** ${skipReason}: the README test is skipped ***\n\n`);
}
const CHROMIUM = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  if (process.env.CI === 'true')
    throw new Error(`${CHROMIUM} is missing and CI=true: install it (apt-get install chromium)`);
  process.stdout.write(`\n*** ${CHROMIUM} not found: the README's browser step is skipped ***\n\n`);
}

interface Block {
  name: string;
  /** 1-based line of the block's first line of code in README.md. */
  line: number;
  code: string;
}

/** The marked blocks of a markdown text: a marker line, then at once a ```bash (or ```sh) fence. */
function markedBlocks(text: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = MARKER.exec(lines[i] as string);
    if (!m) continue;
    const fence = lines[i + 1];
    if (fence !== '```bash' && fence !== '```sh')
      throw new Error(`README.md:${i + 1}: the marker must be followed by a \`\`\`bash fence`);
    const end = lines.indexOf('```', i + 2);
    if (end < 0) throw new Error(`README.md:${i + 2}: the block never ends`);
    blocks.push({ name: m[1] as string, line: i + 3, code: lines.slice(i + 2, end).join('\n') });
    i = end;
  }
  return blocks;
}

interface Run {
  proc: ChildProcess;
  dir: string;
  ports: { api: number; proxy: number; demo: number };
  /** stdout so far, and per block (split at the lines the runner prints before each). */
  out(): string;
  section(name: string): string;
  err(): string;
  /** Resolves when the script prints this line. */
  reached(line: string, timeoutMs?: number): Promise<void>;
  exited: Promise<number | null>;
  /** Whether anything of the script's process group (the script, what it started) still runs. */
  groupAlive(): boolean;
  /** Kills whatever the blocks left running (the whole process group), removes the directory. */
  cleanup(): Promise<void>;
}

const runs: Run[] = [];
afterEach(async () => {
  for (const r of runs.splice(0)) await r.cleanup();
});

const PAUSE = '::readme-test paused';

/**
 * Runs blocks in a fresh scratch directory. With `pauseBefore`, the script prints PAUSE before
 * that block and waits for a line on stdin.
 */
async function runBlocks(blocks: Block[], pauseBefore?: string): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-readme-'));
  symlinkSync(join(ROOT, 'dist'), join(dir, 'dist'));
  // What `npx gatehouse …` runs in the project's directory, without npm and its registry.
  const bin = join(dir, '.bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'npx'),
    `#!/bin/sh\n[ "$1" = gatehouse ] || { echo "readme test: only npx gatehouse is expected, got: $*" >&2; exit 127; }\nshift\nexec node ${JSON.stringify(CLI)} "$@"\n`,
    { mode: 0o755 },
  );
  const script = blocks
    .map(
      (b) =>
        `${b.name === pauseBefore ? `printf '\\n%s\\n' '${PAUSE}'\nread -r _ || true\n` : ''}` +
        `printf '\\n::readme-test %s\\n' '${b.name}'\n# README.md:${b.line}\n${b.code}\n`,
    )
    .join('');
  // After the last block, wait for (and reap) whatever it stopped: the script ends only when
  // everything it started has ended.
  writeFileSync(join(dir, '.readme.sh'), `${script}wait\n`);
  const ports = { api: await freePort(), proxy: await freePort(), demo: await freePort() };
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    // Nothing of the caller's settings, and no HTTP proxy between curl and 127.0.0.1.
    if (k.startsWith('SVC_') || /^(https?|all|no)_proxy$/i.test(k)) continue;
    env[k] = v;
  }
  Object.assign(env, {
    PATH: `${bin}:${process.env.PATH ?? ''}`,
    API: `http://127.0.0.1:${ports.api}`,
    SVC_SERVER_LISTEN: `127.0.0.1:${ports.api}`,
    PROXY_PORT: String(ports.proxy),
    DEMO_PORT: String(ports.demo),
  });
  // Its own process group: everything the blocks start in the background can be killed at once.
  const proc = spawn('bash', ['-e', '-o', 'pipefail', '.readme.sh'], {
    cwd: dir,
    env,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const waiters: { line: string; resolve: () => void }[] = [];
  proc.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) {
      if (out.split('\n').includes(w.line)) w.resolve();
      else waiters.push(w);
    }
  });
  proc.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const groupAlive = () => {
    try {
      process.kill(-(proc.pid as number), 0);
      return true;
    } catch {
      return false;
    }
  };
  const run: Run = {
    proc,
    dir,
    ports,
    out: () => out,
    err: () => err,
    section(name) {
      const start = out.indexOf(`\n::readme-test ${name}\n`);
      if (start < 0) return '';
      const rest = out.slice(start + `\n::readme-test ${name}\n`.length);
      const next = rest.search(/\n::readme-test /);
      return next < 0 ? rest : rest.slice(0, next);
    },
    reached(line, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`the script did not reach "${line}":\n${out}\n${err}`)),
          timeoutMs,
        );
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        void exited.then(() => {
          clearTimeout(timer);
          if (!out.split('\n').includes(line))
            reject(new Error(`the script ended before "${line}":\n${out}\n${err}`));
        });
        if (out.split('\n').includes(line)) done();
        else waiters.push({ line, resolve: done });
      });
    },
    exited,
    groupAlive,
    async cleanup() {
      if (proc.exitCode === null) proc.stdin?.end();
      if (groupAlive()) {
        try {
          process.kill(-(proc.pid as number), 'SIGKILL');
        } catch {
          /* gone meanwhile */
        }
      }
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
  runs.push(run);
  return run;
}

/** Waits until nothing of the script's process group runs any more. */
async function groupGone(run: Run, timeoutMs = 10_000): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (run.groupAlive()) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

const readme = readFileSync(README, 'utf8');

describe('README.md', () => {
  it('marks the blocks a newcomer pastes, and uses no command path that does not exist', () => {
    expect(markedBlocks(readme).map((b) => b.name)).toEqual(EXPECTED_BLOCKS);
    // npm never links a package's own bin: node_modules/.bin/gatehouse does not exist after npm ci.
    expect(readme).not.toContain('node_modules/.bin/gatehouse');
    expect(markedBlocks('<!-- readme-test: x -->\n```bash\necho a\n```\n')).toEqual([
      { name: 'x', line: 3, code: 'echo a' },
    ]);
    expect(() => markedBlocks('<!-- readme-test: x -->\n\n```bash\necho a\n```\n')).toThrow(/followed by/);
  });

  it.skipIf(!!skipReason)(
    'npx gatehouse works in the project directory (the command the README names)',
    () => {
      // --no: never install anything from the registry; the project's own package is what npx
      // runs here. npm 11 links the project into its npx cache to run its bin, and runs the
      // project's `prepare` (the whole build, into this dist/, under other tests' feet) when it
      // does: the build is done already (npm test built it), so scripts are off, and the cache is
      // the test's own, so an interrupted run cannot leave a broken entry for the next one.
      const cache = mkdtempSync(join(tmpdir(), 'gatehouse-npx-'));
      try {
        const r = spawnSync('npx', ['--no', '--', 'gatehouse', 'apikey', 'create', '--help'], {
          cwd: ROOT,
          encoding: 'utf8',
          timeout: 110_000,
          env: { ...process.env, npm_config_cache: cache, npm_config_ignore_scripts: 'true' },
        });
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout).toContain('Usage: gatehouse apikey create');
      } finally {
        rmSync(cache, { recursive: true, force: true });
      }
    },
    120_000,
  );

  it.skipIf(!!skipReason)(
    'runs as written against a fresh service: walk-through, sign-in set-up, API key, proxy on one machine, stop',
    async () => {
      const run = await runBlocks(markedBlocks(readme), HAVE_CHROMIUM ? 'stop' : undefined);
      const fail = () => `stdout:\n${run.out()}\nstderr:\n${run.err()}`;
      if (HAVE_CHROMIUM) {
        await run.reached(PAUSE, 45_000);
        // "Now open http://app.localhost:8081/ in a browser": sign in, and land on the application.
        const browser = await chromium.launch({
          executablePath: CHROMIUM,
          args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
        });
        try {
          const page = await (await browser.newContext()).newPage();
          const app = `http://app.localhost:${run.ports.proxy}/`;
          await page.goto(app);
          expect(page.url(), fail()).toMatch(
            new RegExp(`^http://127\\.0\\.0\\.1:${run.ports.api}/signin\\?`),
          );
          await page.getByLabel('E-mail address').fill('admin@example.com');
          await page.getByRole('button', { name: 'Continue' }).click();
          await page.getByLabel('Password').fill('a long pass phrase');
          await page.getByRole('button', { name: 'Sign in with password' }).click();
          await page.waitForURL(app);
          expect((await page.locator('body').textContent())?.trim()).toBe('hello admin@example.com');
          // Each host kept its own cookies: the service's session never went to the application's host.
          const appCookies = (await page.context().cookies(app)).map((c) => c.name);
          expect(appCookies).toContain('gatehouse_proxy');
          expect(appCookies.filter((n) => /session|device/.test(n))).toEqual([]);
          // The pages' icon loads.
          const icon = await page.request.get(`http://127.0.0.1:${run.ports.api}/favicon.ico`);
          expect(icon.headers()['content-type']).toBe('image/x-icon');
        } finally {
          await browser.close();
        }
        run.proc.stdin?.write('\n');
      }
      const ended = await Promise.race([
        run.exited,
        new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 30_000)),
      ]);
      expect(ended, `the script (or a process it started) did not end\n${fail()}`).toBe(0);

      const start = run.section('start');
      expect(start, fail()).toContain('{"Status":"ok"}');
      expect(start).not.toContain('no key printed');
      const index = JSON.parse(start.trim().split('\n').at(-1) as string) as Record<string, unknown>;
      expect(index, 'GET / must answer the JSON index (is dist/ built from this source?)').toMatchObject({
        Name: 'Gatehouse',
        Links: { SignIn: '/signin', OpenAPI: '/openapi.json', Health: '/healthz' },
      });

      const walk = run.section('walkthrough').trim().split('\n');
      const ada = walk[0] as string;
      expect(ada, fail()).toMatch(/^[a-z0-9]{8,}$/);
      expect(walk).toContain('HTTP/1.1 200 OK\r');
      expect(walk).toContain(`x-id: ${ada}\r`);
      expect(walk).toContain('HTTP/1.1 204 No Content\r');
      const objects = walk
        .filter((l) => l.startsWith('{"ID"'))
        .map((l) => JSON.parse(l) as { ID: string; Item?: Record<string, unknown>; Email?: string });
      // GET's body (a User), then ListItems: the filtered list, the first page and the next one.
      expect(objects[0], fail()).toMatchObject({ ID: ada, Email: 'ada@example.com' });
      expect(objects.slice(1).map((i) => i.Item?.UserName)).toEqual(['ada', 'ada', 'admin']);
      expect(walk.some((l) => /^x-end-cursor: \S+\r$/.test(l))).toBe(true);

      expect(run.section('signin').trim(), fail()).toBe('');
      const listed = JSON.parse(run.section('apikey').trim()) as { ID: string };
      expect(listed.ID).toMatch(/^[a-z0-9]+$/);

      const proxy = run.section('proxy').split('\n');
      expect(proxy, fail()).toContain('hello admin@example.com');
      expect(proxy).toContain('HTTP/1.1 401 Unauthorized\r');
      expect(
        proxy.some(
          (l) =>
            l.startsWith(`302 http://127.0.0.1:${run.ports.api}/proxy/v1/signin?app=`) &&
            l.endsWith(`&return=http%3A%2F%2Fapp.localhost%3A${run.ports.proxy}%2F.gatehouse%2Fcallback`),
        ),
        fail(),
      ).toBe(true);

      // The stop block stopped everything the blocks started.
      expect(await groupGone(run), 'processes left running after the stop block').toBe(true);
    },
    90_000,
  );

  it.skipIf(!!skipReason)(
    'fails when a command fails: the old walk-through with a literal ID gets 404',
    async () => {
      const blocks = markedBlocks(readme).filter((b) => b.name === 'start' || b.name === 'walkthrough');
      const walk = blocks[1] as Block;
      expect(walk.code).toContain('"$API/users/$ADA"');
      blocks[1] = { ...walk, code: walk.code.replace('"$API/users/$ADA"', '"$API/users/4kq0v2m9d1x7ab"') };
      const run = await runBlocks(blocks);
      expect(await run.exited).toBe(22); // curl --fail-with-body on an answer of 400 or more
      expect(run.section('walkthrough')).toContain('"Status":404');
    },
    60_000,
  );
});
