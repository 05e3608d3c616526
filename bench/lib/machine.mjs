// What machine a benchmark ran on.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

const tryRead = (f) => {
  try {
    return readFileSync(f, 'utf8');
  } catch {
    return '';
  }
};

export function machineInfo() {
  const cpuinfo = tryRead('/proc/cpuinfo');
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  const osRelease = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(tryRead('/etc/os-release'))?.[1] ?? os.type();
  let free;
  try {
    free = execFileSync('free', ['-h'], { encoding: 'utf8' }).trim();
  } catch {
    free = `${Math.round(os.totalmem() / 2 ** 30)} GiB total`;
  }
  return {
    nproc: os.availableParallelism(),
    cpuModel: model,
    memTotalGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    free,
    node: process.version,
    os: `${osRelease} (Linux ${os.release()})`,
    loadAvg: os.loadavg().map((x) => Math.round(x * 100) / 100),
    cpuPressure: cpuPressure(),
  };
}

/**
 * Linux pressure stall information for CPU: the share of the last 10 s / 60 s in which some
 * runnable task waited for a CPU (percent). Near 0 on a quiet machine; a benchmark taken while
 * it is high measured a server that had to queue for the CPU. `totalUs` is the cumulative stall
 * time in microseconds: its difference over an interval, divided by the interval, is the share for
 * exactly that interval.
 */
export function cpuPressure() {
  const m = /^some avg10=([\d.]+) avg60=([\d.]+)(?: avg300=[\d.]+ total=(\d+))?/m.exec(
    tryRead('/proc/pressure/cpu'),
  );
  if (!m) return undefined;
  return { avg10: Number(m[1]), avg60: Number(m[2]), totalUs: m[3] === undefined ? undefined : Number(m[3]) };
}
