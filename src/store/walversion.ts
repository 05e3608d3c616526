import { closeSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';

/*
 * Whether anyone has committed to a SQLite database in WAL mode, asked of the wal-index header
 * (https://www.sqlite.org/walformat.html) with one read of the `-shm` file, instead of `PRAGMA
 * data_version`, which begins and ends a read transaction: four locking calls and two file
 * status calls per question. Under load on GET /users/:id that question cost about 15 µs of a
 * request's 170 (docs/benchmarks.md, "The row cache's question").
 *
 * Exact, as data_version is: every commit, by any connection of any process, rewrites the
 * header (its change counter `iChange` goes up and `mxFrame` moves) before the commit returns,
 * and the `-shm` file is shared memory mapped from that file, so a read of it sees what every
 * process's mapping holds. The writer updates the second copy of the header and then the first;
 * only the first is read here. A commit whose first copy is not yet written has not returned to
 * its writer either, so answering "nothing new" then is as if the question came a moment earlier.
 * A read that catches the copy half-written differs from the last one: the cache is emptied for
 * nothing, never kept by mistake.
 *
 * Anything unexpected (no `-shm` yet, another header version, an uninitialised header) asks
 * data_version instead, and any switch between the two counts as a commit.
 */

/** The wal-index header's format version (walformat.html): 3007000 since SQLite 3.7.0. */
const WAL_INDEX_VERSION = 3007000;
/** One copy of the header: 48 bytes at offset 0, a second copy follows. */
const HEADER_BYTES = 48;
/** `isInit`: 1 once the header is valid. */
const IS_INIT_OFFSET = 12;

/**
 * A number that changes whenever a commit happened since the previous call (the contract of
 * `Db.readVersion`), from the wal-index header of the database at `location`, with `fallback`
 * (data_version) where the header cannot answer. `close` releases the file.
 */
export function walIndexVersion(
  location: string,
  fallback: () => number,
): { version: () => number; close: () => void } {
  const shm = `${location}-shm`;
  const little = endianness() === 'LE';
  let fd: number | undefined;
  const header = Buffer.alloc(HEADER_BYTES);
  const seen = Buffer.alloc(HEADER_BYTES);
  let haveSeen = false;
  let lastFallback: number | undefined;
  let version = 0;

  /** Reads the first copy of the header; false when it cannot be trusted. */
  const readHeader = (): boolean => {
    try {
      fd ??= openSync(shm, 'r');
      if (readSync(fd, header, 0, HEADER_BYTES, 0) !== HEADER_BYTES) return false;
    } catch {
      return false;
    }
    const format = little ? header.readUInt32LE(0) : header.readUInt32BE(0);
    return format === WAL_INDEX_VERSION && header[IS_INIT_OFFSET] === 1;
  };

  return {
    version: () => {
      if (readHeader()) {
        lastFallback = undefined;
        if (!haveSeen || !header.equals(seen)) {
          header.copy(seen);
          haveSeen = true;
          version++;
        }
        return version;
      }
      haveSeen = false;
      const v = fallback();
      if (v !== lastFallback) {
        lastFallback = v;
        version++;
      }
      return version;
    },
    close: () => {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}
