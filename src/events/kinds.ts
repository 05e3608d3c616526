import { auditKind } from './audit.js';
import { authKind, otherSessionKind } from './sessions.js';
import type { SpecialKind } from './special.js';

/**
 * The special kinds, by name: Auth and OtherSession (src/events/sessions.ts). Another kind is
 * added, or one replaced, with `registerSpecialKind(name, source)`.
 */
// module-state: the registry of special kinds: code, the same for every service (registerSpecialKind adds one as a module loads).
const specialKinds = new Map<string, SpecialKind>([
  ['Auth', authKind],
  ['OtherSession', otherSessionKind],
  ['AuditEntry', auditKind],
]);

export function registerSpecialKind(kind: string, source: SpecialKind): void {
  specialKinds.set(kind, source);
}

export function specialKind(kind: string): SpecialKind | undefined {
  return specialKinds.get(kind);
}
