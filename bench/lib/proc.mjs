// Reading a process's memory and CPU time from /proc (Linux), for benchmarks of a server we started.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

/** A field of /proc/<pid>/status in KiB (VmRSS, VmHWM, …), or undefined when unreadable. */
export function statusKiB(pid, field) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

export const rssKiB = (pid) => statusKiB(pid, 'VmRSS');
export const hwmKiB = (pid) => statusKiB(pid, 'VmHWM');

/**
 * Resets the process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0, writes "5" to
 * /proc/<pid>/clear_refs; needs the same user or root). Returns false when that is not possible.
 */
export function resetPeakRss(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** Clock ticks per second of the times in /proc/<pid>/stat and /proc/stat (USER_HZ, usually 100). */
export const CLOCK_TICKS = (() => {
  try {
    const v = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(v) && v > 0 ? v : 100;
  } catch {
    return 100;
  }
})();

/** The fields of /proc/<pid>/stat after the command name (which is in parentheses and may hold spaces). */
function statFields(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * User + system CPU time the process (all its threads, also ended ones) has used so far, in clock
 * ticks (CLOCK_TICKS a second), or undefined when it is gone.
 */
export function cpuTicks(pid) {
  const f = statFields(pid);
  return f ? Number(f[11]) + Number(f[12]) : undefined; // utime, stime
}

/** User + system CPU seconds the process has used so far. */
export function cpuSeconds(pid) {
  const t = cpuTicks(pid);
  return t === undefined ? undefined : t / CLOCK_TICKS;
}

/**
 * CPU ticks of this process's children that have ended and been waited for (cutime + cstime of
 * /proc/self/stat): the difference around one run of a load generator we spawned is its CPU time.
 */
export function endedChildrenCpuTicks() {
  const f = statFields('self');
  return f ? Number(f[13]) + Number(f[14]) : undefined;
}

/**
 * The process IDs of a process's children: from /proc/<pid>/task/<tid>/children where the kernel
 * has it (CONFIG_PROC_CHILDREN), else by the parent PID of every process in /proc.
 */
export function childPids(pid) {
  const found = new Set();
  let listed = false;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8');
      listed = true;
      for (const c of text.trim().split(/\s+/)) if (c) found.add(Number(c));
    }
  } catch {
    listed = false;
  }
  if (listed) return [...found];
  found.clear();
  let entries = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const f = statFields(e);
    if (f && Number(f[1]) === pid) found.add(Number(e)); // ppid
  }
  return [...found];
}

/**
 * Samples a process's RSS every `intervalMs` until stopped. The peak is the largest sample; with
 * a reset VmHWM the kernel's own peak is also read at the end, so a short spike between two samples
 * is not missed.
 */
export function sampleRss(pid, intervalMs = 5) {
  const baseline = rssKiB(pid);
  const hwmReset = resetPeakRss(pid);
  let peak = baseline ?? 0;
  let samples = 0;
  const take = () => {
    const v = rssKiB(pid);
    if (v !== undefined) {
      samples++;
      if (v > peak) peak = v;
    }
  };
  const timer = setInterval(take, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      const hwm = hwmReset ? hwmKiB(pid) : undefined;
      const peakKiB = Math.max(peak, hwm ?? 0);
      return {
        baselineKiB: baseline,
        peakKiB,
        growthKiB: baseline === undefined ? undefined : peakKiB - baseline,
        sampledPeakKiB: peak,
        hwmKiB: hwm,
        hwmReset,
        samples,
      };
    },
  };
}

/**
 * Busy and total CPU time of the whole machine (all cores) so far, in clock ticks, from /proc/stat;
 * parts of busy: `softirq` (e.g. loopback network processing, not charged to any process) and
 * `steal` (the hypervisor ran someone else on our virtual CPUs).
 */
export function machineCpuTicks() {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    // user nice system idle iowait irq softirq steal guest guest_nice; guest time is also in user.
    const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const idle = (v[3] ?? 0) + (v[4] ?? 0); // idle + iowait
    const total = v.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total, softirq: v[6] ?? 0, steal: v[7] ?? 0 };
  } catch {
    return undefined;
  }
}

/**
 * Measures CPU use over an interval: call stop() at its end. Returns the process's CPU as a
 * percentage of one core and the whole machine's busy CPU as a percentage of one core
 * (so 200 = both cores of a 2-core machine fully busy).
 */
export function measureCpu(pid) {
  const t0 = performance.now();
  const p0 = cpuSeconds(pid);
  const m0 = machineCpuTicks();
  return {
    stop() {
      const wall = (performance.now() - t0) / 1000;
      const p1 = cpuSeconds(pid);
      const m1 = machineCpuTicks();
      const pct = (x) => Math.round(x * 100);
      let machinePct;
      if (m0 && m1 && m1.total > m0.total) {
        // /proc/stat counts every core: busy share of all ticks, times the number of cores.
        const cores = (m1.total - m0.total) / CLOCK_TICKS / wall;
        machinePct = pct(((m1.busy - m0.busy) / (m1.total - m0.total)) * cores);
      }
      return {
        serverCpuPct: p0 === undefined || p1 === undefined ? undefined : pct((p1 - p0) / wall),
        machineCpuPct: machinePct,
      };
    },
  };
}
