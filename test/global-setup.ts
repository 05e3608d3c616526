import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pgReachable, tryStartLocalCluster } from './pg.js';

/**
 * The sign-in pages' browser code (src/web/assets/) bundled as it is now, so the services the
 * tests start serve what the tree holds, built or not (esbuild takes well under a second).
 */
function buildPages() {
  const root = fileURLToPath(new URL('..', import.meta.url));
  execFileSync(process.execPath, ['scripts/build-pages.mjs'], { cwd: root, stdio: 'pipe' });
}

/**
 * Decides which backends the suite runs on. Locally a missing PostgreSQL is skipped with a
 * printed reason; in CI (CI=true) it is an error, so CI never passes without PostgreSQL.
 */
export default async function setup() {
  buildPages();
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
