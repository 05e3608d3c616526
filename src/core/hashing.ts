import { availableParallelism } from 'node:os';
import { hash, type Options, verify } from '@node-rs/argon2';

/**
 * argon2id parameters for passwords, PINs and codes: OWASP's first recommended set
 * (m=19 MiB, t=2, p=1) is the minimum; we use m=19 MiB, t=2, p=1.
 */
export const ARGON2_OPTIONS: Options = { memoryCost: 19_456, timeCost: 2, parallelism: 1, algorithm: 2 };

/**
 * How many argon2id computations run at once: one per CPU. Each is one thread for about 10 ms over
 * 19 MiB of memory, on libuv's pool of 4 threads by default. More at once than there are CPUs
 * only shares the CPUs and their caches among them, so each one costs more CPU (docs/benchmarks.md,
 * "argon2id at once"), and leaves no pool thread for the file system, DNS or other crypto. The rest wait their turn, in
 * the order they came.
 */
export const HASHING_CONCURRENCY = Math.max(1, availableParallelism());

// module-state: true process singleton: the CPUs are the process's, shared by every service in it.
let hashing = 0;
// module-state: true process singleton: the computations waiting for one of those CPUs.
const waiting: Array<() => void> = [];

async function onACpu<T>(work: () => Promise<T>): Promise<T> {
  if (hashing < HASHING_CONCURRENCY) hashing++;
  else await new Promise<void>((go) => waiting.push(go));
  try {
    return await work();
  } finally {
    // The turn passes straight to the next one waiting; the count falls only when none is.
    const next = waiting.shift();
    if (next) next();
    else hashing--;
  }
}

/** An argon2id hash of `secret` with ARGON2_OPTIONS, in its turn. */
export const argon2Hash = (secret: string): Promise<string> => onACpu(() => hash(secret, ARGON2_OPTIONS));

/** Does `secret` match the argon2id hash `encoded`? In its turn; rejects when `encoded` is malformed. */
export const argon2Verify = (encoded: string, secret: string): Promise<boolean> =>
  onACpu(() => verify(encoded, secret));

/** Computations running and waiting now (for tests and diagnostics). */
export const hashingLoad = () => ({ running: hashing, waiting: waiting.length });
