import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** Runs the built CLI to completion. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs the built CLI to completion without blocking this process's event loop (load it makes goes on). */
export function runCliAsync(args: string[], env: NodeJS.ProcessEnv = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface Served {
  proc: ChildProcess;
  url: string;
  /** Everything printed on stdout so far. */
  stdout: () => string;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `gatehouse serve` and resolves once it logs the address it listens on. `nodeArgs` go to
 * Node.js before the CLI (V8's tracing options, say).
 */
export function serve(args: string[], env: NodeJS.ProcessEnv = {}, nodeArgs: string[] = []): Promise<Served> {
  const proc = spawn(process.execPath, [...nodeArgs, CLI, 'serve', ...args], {
    env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${out}${err}`)), 30_000);
    proc.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
    });
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /"url":"([^"]+)"[^\n]*"msg":"gatehouse listening"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({
          proc,
          url: m[1] as string,
          stdout: () => out,
          exited,
          async stop(signal = 'SIGTERM') {
            if (proc.exitCode === null) proc.kill(signal);
            return exited;
          },
        });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code}: ${out}${err}`));
    });
  });
}

/** The admin key printed on first start (the indented line after the announcement). */
export const printedKey = (stdout: string) => /^\s+(gv[A-Za-z0-9]{54})$/m.exec(stdout)?.[1];
