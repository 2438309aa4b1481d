import { CAPABILITIES } from '../backends/capabilities';
import type { BackendDescription, Flavour } from '../backends/types';
import { windowChecksOf } from '../server';
import type { DriverName } from '../shared/driver-names';
import type { DriverWindow } from '../driver/driver-layer';
import type { DriverLayer } from '../sql/events';
import type { ServerLayer } from '../server/types';
import type { WireCounts } from '../wire/types';
import { truncateStatement } from '../shared/errors';
import { reconcile, type DriverOptions, type Reconciliation } from './reconcile';
import type { Finding, Verdict } from './types';
import { reconcileWire } from './wire-model';

/**
 * Who else may use the server. `mine`: every connection on it is the user's own code (a server sqltally started
 * privately), so server work outside the window's connections is that code going around the proxy. `foreign`:
 * somebody else's clients share it (an external URL, or the user said so), so per-connection attribution may still
 * assert for the window's own connections.
 */
export type OtherConnections = 'mine' | 'foreign';

/** What the window's own code had not finished when its function returned or gave up. */
export interface Unfinished {
  /** Counted calls started before the window (an earlier window's late work) still running when it opened. */
  callsFromBefore?: number;
  /** Driver calls handed to a counted driver and not settled. */
  driverCalls: number;
  /** Requests on the window's proxied connections still waiting for their answer. */
  wireRequests: number;
  /** Client commands that reached the proxy after the function returned, before the server was read. */
  lateCommands: number;
}

/** Asynchronous work the measured function started and had not finished when it returned (src/capture/deferred-work.ts). */
export interface DeferredWorkInput {
  waitMs: number;
  items: readonly { what: string; site: string | null; settled: boolean }[];
}

const SITES_SHOWN = 5;

/** Deferred work in words: each kind with the user's line it was created at, alike ones counted, the first few shown. */
export function deferredWorkWords(items: DeferredWorkInput['items']): string {
  const groups = new Map<string, number>();
  for (const i of items) {
    const key = `${i.what} created at ${i.site ?? 'an unknown line'}${i.settled ? '' : ' (still pending)'}`;
    groups.set(key, (groups.get(key) ?? 0) + 1);
  }
  const shown = [...groups.entries()].slice(0, SITES_SHOWN).map(([k, n]) => (n > 1 ? `${n} × ${k}` : k));
  const more = groups.size - SITES_SHOWN;
  return more > 0 ? `${shown.join('; ')}; and ${more} more` : shown.join('; ');
}

/** Everything a verdict is decided from; layers that were not taken are null. */
export interface VerdictInput {
  backend: BackendDescription;
  driverName?: DriverName;
  driverOptions?: DriverOptions;
  /** The installed version of the driver `driverName` names (its model may depend on the release). */
  driverVersion?: string | null;
  driver: DriverLayer | null;
  /** The window's call groups from the recorder, when the caller has them (the layer's event list is capped). */
  driverWindow?: Pick<DriverWindow, 'groups' | 'insertedRows' | 'groupsIncomplete'>;
  wire: WireCounts | null;
  server: ServerLayer | null;
  /** The error the user's own code threw inside the window: shown as such, never as a count mismatch. */
  workloadError?: { message: string } | null;
  /** The probe itself failed (could not connect, threw): the server layer is missing for that reason. */
  probeError?: string | null;
  /** Default: `mine` on a server sqltally started privately, `foreign` otherwise. */
  otherConnections?: OtherConnections;
  unfinished?: Unfinished | null;
  /** The window's function did not finish in time: what happened, in words (cancelled, rows committed anyway). */
  timedOut?: string | null;
  /** How the window's code reached the server, for the reason when work went around it. */
  via?: string;
  /** The window's requests still unanswered, by connection and statement text: `connection #4242: SELECT pg_sleep(5)`. */
  inFlight?: string[];
  /** Work the function started without awaiting it, pending when it returned: never `assert`. */
  deferredWork?: DeferredWorkInput | null;
  /** What ended the window: its function's return (`measure`, the default) or a call to `end()` (`begin`). */
  endedBy?: 'return' | 'end';
  /** Whose the window's wire traffic may be when no counted call ran in it (see {@link WireOwners}). */
  wireOwners?: WireOwners;
}

/** The window's wire connections that carried commands, against the connections the session's counted calls ran on. */
export interface WireOwners {
  /** Server ids of the window's busy connections on which counted calls ran before: a counted object's connections. */
  counted: readonly number[];
}

/** The reasons' words for the moment a window's code was done, and for what it started. */
const ENDED_BY = {
  return: { when: 'the measured function returned', started: 'work it started', left: 'it left work running that it did not await' },
  end: { when: 'end() was called', started: 'work started in the window', left: 'work started in the window was left running, not awaited' },
} as const;

/** One counter compared between the whole server and the window's own connections. */
export interface BeyondWindow {
  counter: string;
  server: number;
  window: number;
}

const SESSIONS_SHOWN = 5;
/** A reason is read by people: long enough to name every cause, never a dump of a driver's message. */
const REASON_CHARS = 2000;
const INFO_SHOWN = 80;

function list(items: string[]): string {
  const shown = items.slice(0, SESSIONS_SHOWN);
  return items.length > SESSIONS_SHOWN ? `${shown.join('; ')}; and ${items.length - SESSIONS_SHOWN} more` : shown.join('; ');
}

function counterList(counters: Record<string, number>): string {
  return Object.entries(counters)
    .map(([k, v]) => `${k} by ${v > 0 ? '+' : ''}${v}`)
    .join(', ');
}

/**
 * How much the server did beyond the window's own connections, counter by counter, where both sides are known: the
 * comparisons the probe source of the server's flavour declares (`windowChecks` in src/server/, e.g. MySQL's
 * global summary against the window connections' own, PostgreSQL's rows changed against the wire's answers).
 * Only the counters where the server did more are listed. `explainedStatements`: the most statements the window's
 * counted driver calls can have run, from the driver model (a simple Query may carry several).
 */
export function beyondWindow(flavour: Flavour, server: ServerLayer, wire: WireCounts | null, explainedStatements?: number): BeyondWindow[] {
  const out: BeyondWindow[] = [];
  for (const check of windowChecksOf(flavour)) {
    for (const { counter, server: serverValue, window: windowValue } of check({
      server,
      wire,
      ...(explainedStatements === undefined ? {} : { explainedStatements }),
    })) {
      // Only the server doing MORE counts: less (statistics not settled, a prepared COMMIT pg_stat_statements skips)
      // is a reconciliation matter, not work done elsewhere.
      if (serverValue === null || serverValue === undefined || windowValue === null || windowValue === undefined) continue;
      if (serverValue > windowValue) out.push({ counter, server: serverValue, window: windowValue });
    }
  }
  return out;
}

/**
 * Where a server-wide counter moved less than the window's own connections' figure for it, though it counts every
 * row that figure should (a {@link WindowComparison} with `belowMeans`): the window's figure counts something else.
 */
export function belowWindow(flavour: Flavour, server: ServerLayer, wire: WireCounts | null, explainedStatements?: number): string[] {
  const out: string[] = [];
  for (const check of windowChecksOf(flavour)) {
    for (const c of check({ server, wire, ...(explainedStatements === undefined ? {} : { explainedStatements }) })) {
      if (c.belowMeans === undefined || c.server === null || c.server === undefined || c.window === null || c.window === undefined) continue;
      if (c.server < c.window) out.push(`server layer: ${c.counter} moved by ${c.server} server-wide, less than the window's own ${c.window}: ${c.belowMeans}`);
    }
  }
  return out;
}

/** Why the server-wide counters cannot be attributed to the window alone, in words. Empty when they can. */
export function globalDisturbances(backend: BackendDescription, server: ServerLayer, wire: WireCounts | null = null, explainedStatements?: number): string[] {
  const reasons: string[] = [];
  const residue = Object.fromEntries(Object.entries(server.control).filter(([k, v]) => v !== 0 && !k.startsWith('perConnection.')));
  if (Object.keys(residue).length > 0) {
    reasons.push(`control window moved by ${counterList(residue)} after subtracting the probe cost: something else is talking to the server`);
  }
  if (server.foreignSessions.length > 0) {
    reasons.push(
      `client connections outside the window: ${list(
        server.foreignSessions.map(
          (s) =>
            `#${s.id} ${s.user ?? '?'}@${s.host ?? '?'} (${s.command ?? '?'}${s.seconds === undefined ? '' : ` for ${s.seconds} s`}${s.info ? `: ${s.info.slice(0, INFO_SHOWN)}` : ''})`,
        ),
      )}`,
    );
  }
  if (!server.canSeeOtherSessions) reasons.push('the account cannot see other sessions, so isolation cannot be verified');
  if (!backend.capabilities.privateServer) {
    reasons.push(`the server is not private to sqltally (provider ${backend.provider}): other clients may use it unseen${noAttributionWhy(backend)}`);
  }
  for (const b of beyondWindow(backend.flavour, server, wire, explainedStatements)) {
    reasons.push(
      `the server counted ${b.server} ${b.counter} where the window's connections account for ${b.window} (${b.server - b.window > 0 ? '+' : ''}${b.server - b.window})`,
    );
  }
  return reasons;
}

/**
 * Why a window on a shared server has no per-connection attribution, which is what lets it assert there: the
 * server keeps no per-connection statement counts (PostgreSQL), or its performance_schema is off or unreadable.
 */
function noAttributionWhy(backend: BackendDescription): string {
  if (backend.capabilities.perThreadStatements) return '';
  return CAPABILITIES[backend.flavour].perThreadStatements
    ? '; per-connection attribution, which can assert on a shared server, needs performance_schema on (performance_schema=ON in the server options) and readable by this account, and it is not here'
    : `; ${backend.name} keeps no per-connection statement counts, so a window on a shared server cannot be told apart from other clients' work: a private server (local binaries or Testcontainers) can assert`;
}

/** Whether a Node driver's calls were counted in the window: then advice can speak JavaScript (await, session.count()). */
function nodeDriverCounted(input: VerdictInput): boolean {
  return input.driver !== null && (input.driver.calls > 0 || input.driver.ignoredCalls > 0);
}

/** Driver calls of the window that run stored code: `CALL` (MySQL, MariaDB, PostgreSQL) and PostgreSQL's `DO`. */
function storedProgramCalls(input: VerdictInput): number {
  const groups = input.driverWindow?.groups ?? [];
  return groups.reduce((n, g) => n + (g.kind !== 'prepare' && /^[\s(]*(?:call|do)\b/i.test(g.sql) ? g.calls : 0), 0);
}

/**
 * assert: attributable (isolated server, or exact per-connection attribution). report: shown with the reason.
 * incomplete: the workload threw, a layer could not be read to the end, a probe failed, statistics did not settle.
 */
export function decideVerdict(input: VerdictInput): Verdict {
  return judgeWindow(input).verdict;
}

/**
 * The verdict, and the most statements the window's counted calls explain (from the same prediction the verdict
 * compared the layers with), which `beyondWindow` weighs: a caller that lists what the server did beyond the window
 * then weighs it as the verdict did, without predicting again.
 */
export function judgeWindow(input: VerdictInput): { verdict: Verdict; explainedStatements: number | undefined; findings: Finding[] } {
  const { backend, server } = input;
  // A session that counted a driver object before, and a window in which only clients it never counted ran (an ORM
  // that opens its own connections): the driver layer saw none of the window's work, so it explains none of it.
  const noCall = input.driver !== null && input.driver.calls === 0 && input.driver.ignoredCalls === 0 && (input.wire?.commandsTotal ?? 0) > 0;
  // Unless the wire ran on a connection counted calls ran on: then the driver layer missed a counted object's calls.
  const owners = input.wireOwners;
  const missed = noCall && owners !== undefined && owners.counted.length > 0 ? owners : null;
  const uncounted = noCall && missed === null;
  const rec =
    input.driver && input.driverName && !noCall
      ? reconcile({
          driverName: input.driverName,
          driverOptions: input.driverOptions,
          driverVersion: input.driverVersion ?? null,
          capabilities: backend.capabilities,
          driver: input.driver,
          ...(input.driverWindow ? { window: input.driverWindow } : {}),
          wire: input.wire,
          server: server?.summary ?? null,
        })
      : {
          reconciliation: uncounted
            ? [
                `no counted driver call in this window: its ${input.wire?.commandsTotal} wire command(s) came from clients not passed to session.count() (an ORM that opens its own connections), so the driver layer is not compared with the wire and the server`,
              ]
            : [],
          discrepancies: missed ? [missedWords(missed, input.wire?.commandsTotal ?? 0)] : ([] as string[]),
          findings: [] as Finding[],
        };
  // No counted driver explains the window: the wire's own answers are the model the server is compared with.
  const wireModel = !('prediction' in rec) && input.wire && (input.driver === null || noCall) ? reconcileWire(input.wire, server) : null;
  if (wireModel) {
    rec.reconciliation.push(...wireModel.reconciliation);
    rec.discrepancies.push(...wireModel.discrepancies);
  }
  const explainedStatements = 'prediction' in rec ? rec.prediction.server.statements?.max : wireModel?.explainedStatements;
  if (server) rec.discrepancies.push(...belowWindow(backend.flavour, server, input.wire, explainedStatements));
  return { verdict: decide(input, rec, explainedStatements), explainedStatements, findings: rec.findings };
}

/** The discrepancy of a window whose counted object's calls reached the wire but not the driver layer. */
function missedWords(owners: WireOwners, commands: number): string {
  const on = owners.counted.map((id) => `#${id}`).join(', ');
  return `driver layer: no counted call in this window, yet ${commands} wire command(s) ran on connection(s) ${on}, which counted calls ran on in this session: a counted object made calls its wrapper did not see`;
}

function decide(input: VerdictInput, rec: Pick<Reconciliation, 'reconciliation' | 'discrepancies'>, explained: number | undefined): Verdict {
  const { backend, server } = input;
  const verdict = (kind: Verdict['kind'], reason: string): Verdict => ({
    kind,
    reason: truncateStatement(reason, REASON_CHARS),
    reconciliation: rec.reconciliation,
    discrepancies: rec.discrepancies,
  });

  const deferred = input.deferredWork && input.deferredWork.items.length > 0 ? input.deferredWork : null;
  const stillPending = deferred ? deferred.items.filter((i) => !i.settled) : [];
  const ended = ENDED_BY[input.endedBy ?? 'return'];
  const leftRunning = deferred ? `; ${ended.left}: ${deferredWorkWords(deferred.items)}` : '';
  if (input.workloadError) return verdict('incomplete', `the workload threw: ${input.workloadError.message}${leftRunning}`);
  if (input.timedOut) return verdict('incomplete', `the workload did not finish in time: ${input.timedOut}${leftRunning}`);
  if (deferred && stillPending.length > 0) {
    return verdict(
      'incomplete',
      `${ended.when} while ${ended.started} was still pending after a ${deferred.waitMs} ms wait: ${deferredWorkWords(deferred.items)}. Await it: its counts are not the window's`,
    );
  }
  const unfinished = input.unfinished;
  if (unfinished?.callsFromBefore) {
    return verdict(
      'incomplete',
      `${unfinished.callsFromBefore} counted driver call(s) started before this window opened were still running after the wait: late work of an earlier window, which may be counted in this one`,
    );
  }
  if (unfinished && (unfinished.driverCalls > 0 || unfinished.wireRequests > 0 || unfinished.lateCommands > 0)) {
    const parts = [
      unfinished.driverCalls > 0 ? `${unfinished.driverCalls} driver call(s) had not settled` : '',
      unfinished.wireRequests > 0 ? `${unfinished.wireRequests} request(s) on the wire were still unanswered` : '',
      unfinished.lateCommands > 0 ? `${unfinished.lateCommands} command(s) reached the wire after it returned` : '',
    ].filter(Boolean);
    const where = input.inFlight?.length ? ` (${list(input.inFlight)})` : '';
    // Advice in the client's own terms: JavaScript's when a Node driver was counted, else what any client has.
    const why = nodeDriverCounted(input)
      ? "a query started without await, or a callback after the function's end"
      : `a client (a process the window started, or a connection it opened) had not received its answer when the window ended: wait for the client process to exit, or for its last statement's result, before the window ends${where}`;
    return verdict('incomplete', `work was still in flight when ${ended.when} (${parts.join(', ')}): ${why}${leftRunning}; its counts are not the window's`);
  }
  const incomplete: string[] = [];
  if (input.probeError) incomplete.push(`server probe failed: ${input.probeError}`);
  if (input.wire?.incomplete) incomplete.push(`wire layer incomplete: ${input.wire.incompleteReasons.join('; ') || 'no reason given'}`);
  if (server?.incomplete) incomplete.push(`server layer incomplete: ${server.incompleteReasons.join('; ') || 'no reason given'}`);
  if (incomplete.length > 0) return verdict('incomplete', incomplete.join('; '));
  if (deferred) {
    return verdict(
      'report',
      `${ended.when} before ${ended.started} had finished: ${deferredWorkWords(deferred.items)}. It settled within the window's ${deferred.waitMs} ms wait and is counted here, but whether a run counts it depends on timing: await it`,
    );
  }
  if (!server) return verdict('report', 'no server layer was read: counts are not verified at the server');

  const background =
    server.backgroundSessions.length > 0 ? ` (background threads set aside: ${list(server.backgroundSessions.map((s) => `${s.name} #${s.id}`))})` : '';
  const degraded = server.degraded ?? [];
  const disturbances = globalDisturbances(backend, server, input.wire, explained);
  const otherConnections: OtherConnections = input.otherConnections ?? (backend.capabilities.privateServer ? 'mine' : 'foreign');

  const attribution = server.attribution;
  const perConnectionResidue = Object.entries(server.control).filter(([k, v]) => k.startsWith('perConnection.') && v !== 0);
  if (perConnectionResidue.length > 0) {
    return verdict(
      'report',
      `the window's own connections moved during the empty control window (${perConnectionResidue.map(([k, v]) => `${k} ${v}`).join(', ')})${background}`,
    );
  }
  if (degraded.length > 0) return verdict('report', [...degraded, ...disturbances].join('; '));
  if (attribution && !attribution.exact) {
    const missing = attribution.missing?.length
      ? attribution.missing
      : attribution.requested.filter((id) => !attribution.found.includes(id)).map((id) => `#${id} not found`);
    return verdict(
      'report',
      `per-connection attribution is not exact: ${missing.join('; ') || 'no window connection was given'}${disturbances.length ? `; ${disturbances.join('; ')}` : ''}${background}`,
    );
  }
  // Layers that disagree in a way the driver model cannot explain are not an assert, whatever the attribution.
  const disagree = rec.discrepancies.length > 0 ? `the layers disagree where the driver model cannot explain it: ${rec.discrepancies.join('; ')}` : null;
  const beyond = beyondWindow(backend.flavour, server, input.wire, explained);
  const bypass = (what: string): Verdict => {
    const via = input.via ? ` (the window saw ${input.via})` : '';
    // With no other session or connection and a still control window, only the counters say the server did more: the
    // window's own server-side code does that as well as a client around the proxy, and they cannot tell which.
    const otherClientSeen =
      server.foreignSessions.length > 0 ||
      beyond.some((b) => b.counter.includes('connections opened')) ||
      Object.entries(server.control).some(([k, v]) => v !== 0 && !k.startsWith('perConnection.'));
    const stored = storedProgramCalls(input);
    const connect = nodeDriverCounted(input)
      ? 'connect it to session.connection, or count it with session.count()'
      : "point every client at the proxy's host and port (session.connection; a child process gets them in its environment) rather than the server's own port, and look for a process or connection that kept the server's address";
    const why = otherClientSeen
      ? `On a server sqltally started for this session every client is your own code, so some of it reached the server around the proxy: ${connect}`
      : `No other client session was there: server-side code the window's statements ran does work no answer reports (a trigger, a stored procedure or function${stored > 0 ? `; the window ran ${stored} CALL or DO statement(s)` : ''}), or some of your code reached the server around the proxy: ${connect}`;
    return verdict('report', `the server did work the window's connections do not account for: ${what}${via}. ${why}${background}`);
  };

  if (attribution?.exact && server.perConnection) {
    const how = `per-connection attribution (${attribution.method}) covers the window's connection${attribution.requested.length === 1 ? '' : 's'} ${attribution.requested.map((id) => `#${id}`).join(', ')} exactly`;
    // SQLite with several handles has no way to see a writer beside them (each handle's data_version moves for the others).
    const blind = attribution.method === 'total_changes' && !server.canSeeOtherSessions;
    if (disagree) return verdict('report', `${disagree}${disturbances.length ? `; ${disturbances.join('; ')}` : ''}${background}`);
    if (beyond.length === 0 && !blind) {
      // Other sessions may be there, idle: the server's own counters say they did nothing in the window.
      const idle = disturbances.length > 0 ? `; the server did nothing beyond them (${disturbances.join('; ')})` : ', and the server did nothing beyond them';
      return verdict('assert', `${how}${idle}${background}`);
    }
    if (otherConnections === 'foreign' && !blind) {
      return verdict('assert', `${how}; the server as a whole also did other clients' work, set aside: ${disturbances.join('; ')}${background}`);
    }
    // With no handle counted there is nothing attribution covers, so the reason does not begin by saying it does.
    const blindWhy =
      attribution.requested.length === 0
        ? 'no SQLite handle is counted in the session, so nothing reads the file and no writer to it can be seen (count the Database your code writes through with session.count())'
        : `${how}, but with several SQLite handles a writer beside them cannot be seen`;
    return blind ? verdict('report', `${blindWhy}${background}`) : bypass(disturbances.join('; '));
  }
  if (disturbances.length > 0) {
    if (otherConnections === 'mine') return bypass([disagree, ...disturbances].filter(Boolean).join('; '));
    return verdict('report', `${[disagree, ...disturbances].filter(Boolean).join('; ')}${background}`);
  }
  if (disagree) return verdict('report', `${disagree}${background}`);
  return verdict('assert', `isolated: private server, control window 0 after the measured probe cost, no other client sessions${background}`);
}
