import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/store/db.js';
import { walIndexVersion } from '../../src/store/walversion.js';

/*
 * The row cache serves rows again only while `readVersion` says nothing was committed
 * (src/store/rowcache.ts). On SQLite that question is read from the wal-index header
 * (src/store/walversion.ts): it must see every commit, by this process's connections and by
 * another process (the CLI writing beside a running service), and must not see one where there
 * was none, or the cache would do nothing.
 */
describe('the version of a SQLite database read from its wal-index', () => {
  let dir: string;
  let location: string;
  let db: Db;
  /** Another connection in this process, as a second store would have. */
  let other: SQLite.Database;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-walversion-'));
    location = join(dir, 'g.db');
    db = openDb(location);
    db.runSync?.('CREATE TABLE t (x INTEGER)', []);
    other = new SQLite(location);
  });
  afterAll(async () => {
    other?.close();
    await db?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const version = () => {
    if (!db.readVersion) throw new Error('SQLite answers readVersion');
    return db.readVersion();
  };
  /** A commit by another process: what `gatehouse apikey create` beside the service does. */
  const commitInAnotherProcess = () =>
    execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import S from 'better-sqlite3'; new S(${JSON.stringify(location)}).prepare('INSERT INTO t VALUES (3)').run();`,
      ],
      { cwd: process.cwd() },
    );

  it('changes with each commit by this connection, another, and another process', () => {
    const steps: Array<[string, () => void]> = [
      ['this writer', () => db.runSync?.('INSERT INTO t VALUES (1)', [])],
      ['another connection', () => other.prepare('INSERT INTO t VALUES (2)').run()],
      ['another process', commitInAnotherProcess],
    ];
    for (const [who, commit] of steps) {
      const before = version();
      commit();
      expect(version(), `a commit by ${who}`).not.toBe(before);
    }
  });

  it('stays the same while nothing is committed, reads and checkpoints included', () => {
    db.runSync?.('INSERT INTO t VALUES (4)', []);
    const settled = version();
    db.readSync?.('SELECT count(*) FROM t', []);
    other.prepare('SELECT count(*) FROM t').get();
    other.pragma('wal_checkpoint(PASSIVE)');
    expect(version()).toBe(settled);
    expect(version()).toBe(settled);
  });

  it('any interleaving: a commit since the last question always changes the answer', () => {
    const commits = {
      here: () => db.runSync?.('INSERT INTO t VALUES (5)', []),
      there: () => other.prepare('INSERT INTO t VALUES (6)').run(),
      'in a transaction': () => other.transaction(() => other.prepare('UPDATE t SET x = x + 1').run())(),
      'after a full checkpoint': () => {
        other.pragma('wal_checkpoint(TRUNCATE)');
        other.prepare('INSERT INTO t VALUES (7)').run();
      },
    };
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('ask', 'read', ...Object.keys(commits)), { maxLength: 25 }),
        (ops) => {
          let last = version();
          let committed = false;
          for (const op of ops) {
            if (op === 'ask') {
              const now = version();
              if (committed) expect(now).not.toBe(last);
              else expect(now).toBe(last);
              last = now;
              committed = false;
            } else if (op === 'read') db.readSync?.('SELECT x FROM t LIMIT 1', []);
            else {
              commits[op as keyof typeof commits]();
              committed = true;
            }
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('asks SQLite instead where the header cannot answer, and counts a switch as a commit', () => {
    let asked = 0;
    let sqliteVersion = 7;
    const fallback = () => {
      asked++;
      return sqliteVersion;
    };
    // No -shm file at all (not in WAL mode yet): every question goes to SQLite.
    const missing = walIndexVersion(join(dir, 'none.db'), fallback);
    const first = missing.version();
    expect(missing.version()).toBe(first);
    sqliteVersion = 8;
    expect(missing.version()).not.toBe(first);
    expect(asked).toBe(3);
    missing.close();
    // A header of another format: not trusted.
    const foreign = join(dir, 'foreign.db');
    writeFileSync(`${foreign}-shm`, Buffer.alloc(96, 1));
    const strange = walIndexVersion(foreign, fallback);
    strange.version();
    expect(asked).toBe(4);
    strange.close();
    // A valid header, then a broken one, then the same valid one again: each switch is a new
    // version, though SQLite's answer and the header are each unchanged.
    const switching = join(dir, 'switching.db');
    const valid = Buffer.alloc(96);
    valid.writeUInt32LE(3007000, 0);
    valid[12] = 1;
    writeFileSync(`${switching}-shm`, valid);
    const flip = walIndexVersion(switching, fallback);
    const v1 = flip.version();
    expect(flip.version()).toBe(v1);
    writeFileSync(`${switching}-shm`, Buffer.alloc(96));
    const v2 = flip.version();
    expect(v2).not.toBe(v1);
    expect(flip.version()).toBe(v2);
    writeFileSync(`${switching}-shm`, valid);
    expect(flip.version()).not.toBe(v2);
    expect(asked).toBe(6);
    flip.close();
  });
});
