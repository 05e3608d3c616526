import { ApiError } from '../core/errors.js';
import { Group } from '../objects/group.js';
import { Membership } from '../objects/membership.js';
import { type HookName, Script, scriptWrites } from '../objects/script.js';
import { SCRIPT_TENANT_FIELDS } from '../objects/scriptlimits.js';
import { TENANT_ID, Tenant } from '../objects/tenant.js';
import type { Doc } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { iterateQuery, iterateWhere } from '../store/find.js';
import type { RawListQuery } from '../store/listquery.js';
import { perService, type ServiceContext, stateOf } from '../store/service.js';
import { type LogEntry, recordRun } from './logs.js';
import { HOST_LIMITS, sandboxPool } from './pool.js';
import { redactInput } from './redact.js';
import type { SandboxResult } from './worker.js';

/** The sandbox limits of a run, from the Tenant (docs/scripts.md, "Limits"). */
export interface Limits {
  timeMs: number;
  memoryBytes: number;
  stackBytes: number;
  outputBytes: number;
}

export function limitsOf(tenant: Doc): Limits {
  const n = (k: keyof typeof SCRIPT_TENANT_FIELDS) => {
    const v = tenant[k];
    return typeof v === 'number' ? v : (SCRIPT_TENANT_FIELDS[k].default as number);
  };
  return {
    timeMs: n('ScriptTimeLimitMs'),
    memoryBytes: n('ScriptMemoryLimitBytes'),
    stackBytes: n('ScriptStackLimitBytes'),
    outputBytes: n('ScriptOutputLimitBytes'),
  };
}

/** What the host API (gatehouse.user(), .groups(), .tenant()) gives a run. */
export interface HostData {
  user: Doc | null;
  groups: Doc[];
  tenant: Doc;
}

/** One run's outcome, as the hooks see it. `result` is the parsed JSON the script returned. */
export interface RunOutcome {
  ok: boolean;
  result: unknown;
  raw: SandboxResult;
}

/** Runs source in the sandbox (a worker thread). Never throws for anything the script does. */
export async function runSource(
  source: string,
  input: unknown,
  data: HostData,
  limits: Limits,
  checkCompile = false,
  callHook = true,
): Promise<RunOutcome> {
  const raw = await sandboxPool().run({
    source,
    input: JSON.stringify(input ?? null),
    data: JSON.stringify(data),
    ...limits,
    checkCompile,
    callHook,
  });
  if (raw.error !== '' || raw.limits.length > 0) return { ok: false, result: undefined, raw };
  let result: unknown;
  try {
    // JSON made inside the sandbox: parsed as data, never evaluated.
    result = raw.result === undefined ? undefined : JSON.parse(raw.result);
  } catch {
    return { ok: false, result: undefined, raw: { ...raw, error: 'the result is not JSON' } };
  }
  return { ok: true, result, raw };
}

// ---- the enabled scripts of each hook and the tenant's settings, cached ---------------------------

interface Cached {
  at: number;
  writes: number;
  tenant: Doc;
  byHook: Map<string, Doc[]>;
}
/** Bound on how stale the cache may be when another instance changed a script. */
const CACHE_MS = 5000;
/** The service's cache, emptied by its store's commits (src/store/service.ts: one per service). */
const SCRIPT_CACHE = perService<{ value?: Cached }>('enabled scripts cache', (ctx) => {
  const entry: { value?: Cached } = {};
  let seen = scriptWrites.count;
  // After every commit: a Script created or changed since the last commit (its prepare hook
  // counted it), or a Script or the Tenant updated or deleted, drops the cache. Dropping only
  // after the commit means the next load reads the committed scripts.
  const drop = (kinds?: Set<string>) => {
    if (!kinds || kinds.has('Script') || kinds.has('Tenant') || scriptWrites.count !== seen)
      entry.value = undefined;
    seen = scriptWrites.count;
  };
  ctx.store.commits.on('commit', drop);
  ctx.store.commits.on('remote', (updated?: ReadonlySet<string>, created?: ReadonlySet<string>) =>
    drop(updated && created ? new Set([...updated, ...created]) : undefined),
  );
  return entry;
});

/** The objects a list query selects (src/store/find.ts). */
export const iterate = (ctx: ServiceContext, type: ObjectType, raw: RawListQuery) =>
  iterateQuery(ctx.store, type, raw);

async function loaded(ctx: ServiceContext): Promise<Cached> {
  const c = stateOf(ctx, SCRIPT_CACHE);
  const v = c.value;
  if (v && v.writes === scriptWrites.count && Date.now() - v.at < CACHE_MS) return v;
  const writes = scriptWrites.count;
  const tenant = (await ctx.store.get(Tenant, TENANT_ID))?.doc ?? {};
  const byHook = new Map<string, Doc[]>();
  for await (const s of iterate(ctx, Script, { filter: 'Enabled = true', order: ['Order', 'ID'] })) {
    const hook = String(s.Hook ?? '');
    if (hook === '') continue;
    const list = byHook.get(hook) ?? [];
    list.push(s);
    byHook.set(hook, list);
  }
  const value = { at: Date.now(), writes, tenant, byHook };
  c.value = value;
  return value;
}

/** The tenant document (cached with the scripts). */
export async function tenantOf(ctx: ServiceContext): Promise<Doc> {
  return (await loaded(ctx)).tenant;
}

/** Does any enabled script serve this hook? (Hooks skip all their work when none does.) */
export async function hasScripts(ctx: ServiceContext, hook: HookName): Promise<boolean> {
  return ((await loaded(ctx)).byHook.get(hook)?.length ?? 0) > 0;
}

/** The user's memberships with their groups' names, for gatehouse.groups() and hook inputs. */
export async function groupsOf(ctx: ServiceContext, userId: string): Promise<Doc[]> {
  if (userId === '') return [];
  const out: Doc[] = [];
  for await (const m of iterateWhere(ctx.store, Membership, { UserID: userId }, ['GroupID'])) {
    const g = await ctx.store.get(Group, String(m.GroupID));
    out.push({ ID: String(m.GroupID), Name: String(g?.doc.Name ?? ''), State: String(m.State ?? '') });
  }
  return out;
}

export interface ScriptRun {
  script: Doc;
  outcome: RunOutcome;
  /** Record what the service did with this run's result (ScriptLog.Applied) and write the log. */
  done(applied: string): void;
}

/**
 * Runs every enabled script of a hook, in order. `step` gets each run's outcome and returns the
 * input of the next script (so scripts of one hook refine each other's output) and what was
 * applied; a script that fails leaves the input as it was (the caller's fail-safe decides).
 * Every run is logged (ScriptLog), in the background.
 */
export async function runHook<I>(
  ctx: ServiceContext,
  hook: HookName,
  input: I,
  data: HostData,
  step: (input: I, outcome: RunOutcome, script: Doc) => { next: I; applied: string; stop?: boolean },
): Promise<I> {
  const c = await loaded(ctx);
  const scripts = c.byHook.get(hook) ?? [];
  const limits = limitsOf(c.tenant);
  let current = input;
  for (const script of scripts) {
    const started = Date.now();
    const outcome = await runSource(String(script.Source ?? ''), current, data, limits);
    if (hook === 'sign-in' && outcome.raw.limits.some((l) => HOST_LIMITS.includes(l))) {
      // The host was too busy to run the script (no worker in time, or no CPU for it): that says
      // nothing about the person signing in, so it is no reason to deny. Try again later (503).
      recordRun(
        ctx,
        entryOf(script, hook, started, current, outcome, 'not decided: the service was busy (503)'),
      );
      throw new ApiError('Unavailable', 'the sign-in rules cannot be run right now; try again shortly', {
        headers: { 'Retry-After': '2' },
      });
    }
    const { next, applied, stop } = step(current, outcome, script);
    recordRun(ctx, entryOf(script, hook, started, current, outcome, applied));
    current = next;
    if (stop) break;
  }
  return current;
}

export function entryOf(
  script: Doc,
  hook: string,
  started: number,
  input: unknown,
  outcome: RunOutcome,
  applied: string,
): LogEntry {
  const r = outcome.raw;
  return {
    ScriptID: String(script.ID ?? ''),
    ScriptName: String(script.Name ?? ''),
    Hook: hook,
    Test: '',
    Time: new Date(started).toISOString(),
    Input: JSON.stringify(redactInput(input ?? null)),
    Console: r.console,
    Result: outcome.ok && r.result !== undefined ? r.result : '',
    Error: r.error.slice(0, 4096),
    DurationMs: Math.round(r.durationMs * 1000) / 1000,
    LimitsHit: r.limits,
    Applied: applied.slice(0, 256),
    Passed: false,
    Expected: '',
  };
}
