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
  };
}
