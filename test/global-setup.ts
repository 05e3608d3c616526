import { pgReachable, tryStartLocalCluster } from './pg.js';

/**
 * Decides which backends the suite runs on. Locally a missing PostgreSQL is skipped with a
 * printed reason; in CI (CI=true) it is an error, so CI never passes without PostgreSQL.
 */
export default async function setup() {
  const wanted = (process.env.GATEHOUSE_TEST_BACKENDS ?? 'sqlite,postgres').split(',').map((s) => s.trim());
  let backends = wanted.filter((b) => b === 'sqlite' || b === 'postgres');
  if (backends.includes('postgres')) {
    if (!(await pgReachable())) tryStartLocalCluster();
    if (!(await pgReachable())) {
      if (process.env.CI)
        throw new Error('PostgreSQL is not reachable and CI=true: the suite must run on both backends');
      process.stdout.write(
        '\n*** PostgreSQL is not reachable: skipping the postgres backend (set GATEHOUSE_TEST_PG) ***\n\n',
      );
      backends = backends.filter((b) => b !== 'postgres');
    }
  }
  process.env.GATEHOUSE_TEST_ACTIVE_BACKENDS = backends.join(',');
}
