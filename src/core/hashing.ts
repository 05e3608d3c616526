import { availableParallelism } from 'node:os';
import { hash, type Options, verify } from '@node-rs/argon2';

/**
 * argon2id parameters for passwords, PINs and codes: OWASP's first recommended set
 * (m=19 MiB, t=2, p=1) is the minimum; we use m=19 MiB, t=2, p=1.
 */
export const ARGON2_OPTIONS: Options = { memoryCost: 19_456, timeCost: 2, parallelism: 1, algorithm: 2 };

/**
 * argon2id computations wait their turn here, first come first served: at most one per CPU, and
 * always one of libuv's threads (4 unless UV_THREADPOOL_SIZE says otherwise) left for the rest.
 * Without it every verification ran at once on libuv's threads: a burst of password attempts
 * held all of them, so every file read, DNS lookup and zlib call of the service queued behind
 * the hashes; and with fewer CPUs than threads the hashes took turns on the cores (on 2 CPUs the
 * server spent less CPU per sign-in with two at a time in two sittings of three). Passwords, the dummy check for unknown users
 * and codes all wait in the one queue, so a wait says nothing about which of them is behind it.
 * An operator who wants more CPUs hashing at once raises UV_THREADPOOL_SIZE (docs/signin.md).
 */
export class Turns {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private admitted = 0;

  /**
   * `limit`: how many run at once. `maxAdmitted`: how many callers may hold an admission (admit)
   * at once, which bounds what they can queue and so how long any of them waits.
   */
  constructor(
    private readonly limit: number,
    private readonly maxAdmitted = Number.POSITIVE_INFINITY,
  ) {}

  /**
   * Admission of a caller that will ask for turns (a sign-in check): a release function to call
   * once when it is done (calling it again does nothing), or undefined when `maxAdmitted` callers
   * hold one already. A caller refused here has done nothing yet: it is asked to come back, not
   * made to wait behind work it cannot see the end of.
   */
  admit(): (() => void) | undefined {
    if (this.admitted >= this.maxAdmitted) return undefined;
    this.admitted++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.admitted--;
    };
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      // The turn passes straight to the next in line: `running` stays as it is.
      if (next) next();
      else this.running--;
    }
  }
}

/** libuv's thread pool: UV_THREADPOOL_SIZE, read by libuv when the pool starts (1 to 1024), else 4. */
export function threadPoolSize(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.UV_THREADPOOL_SIZE);
  return Number.isInteger(n) && n > 0 ? Math.min(n, 1024) : 4;
}

/** How many argon2id computations may run at once: one per CPU, one pool thread kept free. */
export const argon2Concurrency = (cpus: number, poolSize: number) =>
  Math.max(1, Math.min(cpus, poolSize - 1));

/**
 * Sign-in checks admitted at once per argon2id computation that may run at once: 128, so an
 * admitted check waits at most about 128 computations' time for its turn (about 2.3 s on 2 CPUs,
 * at 18 ms each), and bursts far beyond any one client's (a browser, a script retrying) pass.
 */
export const ADMITTED_PER_TURN = 128;

// The CPUs and libuv's threads are the process's, whatever the number of services in it.
// module-state: true process singleton: one queue for the process's CPUs and libuv threads.
const argon2Turns = (() => {
  const atOnce = argon2Concurrency(availableParallelism(), threadPoolSize());
  return new Turns(atOnce, atOnce * ADMITTED_PER_TURN);
})();

/**
 * Admission of one regulated sign-in check (src/auth/factors/factor.ts, `regulated`), taken before
 * the attempt is counted: a release function, or undefined while as many checks are under way as
 * the argon2id queue can serve in bounded time. Every wait for a turn is then bounded.
 */
export const admitSecretCheck = (): (() => void) | undefined => argon2Turns.admit();

/** An argon2id hash of `plain` (ARGON2_OPTIONS), in its turn. */
export const argon2Hash = (plain: string): Promise<string> =>
  argon2Turns.run(() => hash(plain, ARGON2_OPTIONS));

/** Does `plain` match the argon2id hash `stored`? Throws on a malformed hash, as `verify` does. */
export const argon2Verify = (stored: string, plain: string): Promise<boolean> =>
  argon2Turns.run(() => verify(stored, plain));
