import type { Options } from '@node-rs/argon2';

/**
 * argon2id parameters for passwords, PINs and codes: OWASP's first recommended set
 * (m=19 MiB, t=2, p=1) is the minimum; we use m=19 MiB, t=2, p=1.
 */
export const ARGON2_OPTIONS: Options = { memoryCost: 19_456, timeCost: 2, parallelism: 1, algorithm: 2 };
