import type { Tally } from '../capture/tally';
import type { Flavour } from '../backends/types';
import { fingerprint } from '../sql/fingerprint';
import { dialectOf } from '../server';
import { SERVER_WORK_FIGURES, type ServerWork, type ServerWorkFigure } from '../server/server-work';
import { ShapeStatsSchema } from '../sql/shapes';
import type { DriverLayerWithShapes, ShapeStat } from '../sql/shapes';
import { pathLabel } from '../driver/compat/path';

/**
 * The first line of every count snapshot. A stored snapshot with another version is refused by name: its lines
 * may mean something else, so comparing them would report differences that are not in the counts.
 */
export const COUNT_SNAPSHOT_VERSION = 'v1';
export const COUNT_SNAPSHOT_FORMAT = `sqltally-count-snapshot ${COUNT_SNAPSHOT_VERSION}`;
const FORMAT_LINE = /sqltally-count-snapshot v(\d+)/;

/** The snapshot text of a tally, or why no snapshot can be taken (then the matcher fails with and without `.not`). */
export type CountSnapshot = { ok: true; text: string } | { ok: false; reason: string };

/** What a count snapshot holds beyond the counts and shapes. */
export interface CountSnapshotOptions {
  /**
   * The server-work section too (docs/server-work.md): each figure the server gives exactly, each unknown one
   * named with its reason, per statement entry and per table. Off by default, so existing snapshots stay as they are.
   */
  serverWork?: boolean;
}

/**
 * Figures that are exact for the window but not reproduced by a rerun of the same code: a snapshot of them would
 * change on every run. They are named in the snapshot as left out, with this reason.
 */
const NOT_REPRODUCED: Partial<Record<ServerWorkFigure, string>> = {
  lockTimeNs: 'a time, not a count: it differs on every run',
  sharedBlocksHit: 'depends on what the buffer cache held before the window',
  sharedBlocksRead: 'depends on what the buffer cache held before the window',
};

// Reasons can carry connection ids and per-run figures ("#4711", "3/4"): masked so that the line names the reason only.
function stableReason(reason: string): string {
  return reason.replace(/\b\d+\b/g, 'N');
}

function workFigures(figures: Partial<Record<string, number>>): string {
  return SERVER_WORK_FIGURES.filter((f) => !NOT_REPRODUCED[f] && typeof figures[f] === 'number')
    .map((f) => `${f}=${figures[f]}`)
    .join(' ');
}

/** The server-work lines: one per figure (value, unknown with its reason, or left out with why), statements, tables. */
function serverWorkLines(lines: string[], work: ServerWork, flavour: Flavour): void {
  for (const f of SERVER_WORK_FIGURES) {
    const value = work.figures[f];
    const notReproduced = NOT_REPRODUCED[f];
    if (typeof value === 'number') lines.push(notReproduced ? `server.work.${f}: left out (${notReproduced})` : `server.work.${f}: ${value}`);
    else lines.push(`server.work.${f}: unknown (${stableReason(work.unknown[f] ?? 'not read in this window')})`);
  }
  if (!work.statements) {
    lines.push(`server.work.statements: unknown (${stableReason(work.statementsUnknown ?? 'not read in this window')})`);
  } else {
    const entries = work.statements
      .map((e) => `  ${fingerprint(e.text, dialectOf(flavour))} calls=${e.calls}${workFigures(e.figures) ? ` ${workFigures(e.figures)}` : ''}`)
      .sort(compare);
    lines.push(`server.work.statements: ${entries.length}`, ...entries);
  }
  if (work.tables) {
    const tables = [...work.tables].sort((a, b) => compare(a.table, b.table));
    lines.push(`server.work.tables: ${tables.length}`);
    for (const t of tables)
      lines.push(`  ${t.table} seqScans=${t.seqScans} seqRowsRead=${t.seqRowsRead} indexScans=${t.indexScans} indexRowsFetched=${t.indexRowsFetched}`);
  }
}

function counter(lines: string[], path: string, value: number | null | undefined, absent: string): void {
  lines.push(`${path}: ${typeof value === 'number' ? value : `n/a (${absent})`}`);
}

// Only what occurred: a zero would make every snapshot change when a call kind or statement class is added.
function sparse(lines: string[], prefix: string, map: Partial<Record<string, number>>): void {
  for (const key of Object.keys(map).sort()) {
    const value = map[key];
    if (value) lines.push(`${prefix}.${key}: ${value}`);
  }
}

// Code-unit order, the same on every machine and locale.
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function shapeLine(s: ShapeStat): string {
  return `  ${s.id} ${s.statementClass}/${s.kind} calls=${s.calls} parameterSets=${s.parameterSets}: ${s.fingerprint}`;
}

/**
 * The deterministic counts of a tally, one line per counter, for a snapshot file: driver, wire and (under `assert`)
 * server counts and the shapes sorted by fingerprint; nothing a rerun does not reproduce (callers, timings, ids,
 * ports, versions, bytes, socket writes, reasons). `serverWork` adds an `assert` window's server-work figures.
 * Refuses a value that is not a tally, a window whose code threw, an incomplete layer. See docs/capture-api.md.
 */
/**
 * The drivers a tally's counts came through: those counted into the session, not the session's own default, so a
 * window of an ORM that brought its own driver (Sequelize on the mariadb connector) is not labelled with another.
 */
export function countedVia(tally: Pick<Tally, 'driver' | 'drivers' | 'layers'>, opts: { paths?: boolean } = {}): string {
  const drivers = tally.drivers ?? [];
  if (drivers.length > 0) {
    // Names only in a snapshot: the same counts on the fast and the plain path make the same snapshot.
    if (!opts.paths) return [...new Set(drivers.map((d) => d.name))].join(', ');
    return drivers.map((d) => `${d.name} (${pathLabel(d.path)})`).join(', ');
  }
  return tally.layers.driver ? tally.driver : 'no counted driver';
}

export function countSnapshotOf(tally: Tally, options: CountSnapshotOptions = {}): CountSnapshot {
  if (tally.workloadError) {
    return {
      ok: false,
      reason: `the captured code threw (phase ${tally.workloadError.phase}: ${tally.workloadError.message}), so its counts are not a baseline`,
    };
  }
  const { driver, wire, server } = tally.layers;
  if (wire?.incomplete) return { ok: false, reason: `the wire layer is incomplete: ${wire.incompleteReasons.join('; ')}` };
  if (server?.incomplete) return { ok: false, reason: `the server layer is incomplete: ${server.incompleteReasons.join('; ')}` };
  if (tally.verdict.kind === 'incomplete') return { ok: false, reason: `the verdict is incomplete: ${tally.verdict.reason}` };

  const lines = [COUNT_SNAPSHOT_FORMAT, `backend: ${tally.backend.name} via ${countedVia(tally)}`, `verdict: ${tally.verdict.kind}`];
  if (!driver) {
    lines.push('driver: not captured');
  } else {
    counter(lines, 'driver.calls', driver.calls, 'not counted');
    sparse(lines, 'driver.byKind', driver.byKind);
    sparse(lines, 'driver.byClass', driver.byClass);
    counter(lines, 'driver.parameterSets', driver.parameterSets, 'not counted');
    counter(lines, 'driver.bindValues', driver.bindValues, 'not counted');
    counter(lines, 'driver.rowsAffected', driver.rowsAffected, 'not counted');
    counter(lines, 'driver.errors', driver.errors, 'not counted');
  }
  if (!wire) {
    lines.push('wire: not captured (in-process backend, or the wire proxy was off)');
  } else {
    sparse(lines, 'wire.commands', wire.commands);
    counter(lines, 'wire.commandsTotal', wire.commandsTotal, 'not counted');
    counter(lines, 'wire.roundTrips', wire.roundTrips, 'not counted');
    counter(lines, 'wire.connections', wire.connections, 'not counted');
    counter(lines, 'wire.rowsAffected', wire.rowsAffected, 'some answers carry their row counts elsewhere');
  }
  if (!server) {
    lines.push('server: not captured');
  } else if (tally.verdict.kind !== 'assert') {
    lines.push(`server: left out, the verdict is ${tally.verdict.kind}, not assert`);
  } else {
    for (const [key, value] of Object.entries(server.summary)) counter(lines, `server.${key}`, value, 'this server cannot tell');
  }
  if (options.serverWork) {
    // The same rule as the summary: only an `assert` window's server figures are the window's own.
    if (!server) lines.push('server.work: not captured');
    else if (tally.verdict.kind !== 'assert') lines.push(`server.work: left out, the verdict is ${tally.verdict.kind}, not assert`);
    else if (!server.work) lines.push('server.work: not read (this server layer has no server-work section)');
    else serverWorkLines(lines, server.work, tally.backend.flavour);
  }
  if (driver) {
    const raw = (driver as DriverLayerWithShapes).shapes;
    if (raw === undefined) {
      lines.push('shapes: not recorded by this driver layer');
    } else {
      const parsed = ShapeStatsSchema.safeParse(raw);
      if (!parsed.success)
        return {
          ok: false,
          reason: `the driver layer's shapes do not parse: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
        };
      const shapes = [...parsed.data].sort((a, b) => compare(a.fingerprint, b.fingerprint) || compare(a.kind, b.kind));
      lines.push(`shapes: ${shapes.length}`);
      for (const s of shapes) lines.push(shapeLine(s));
    }
  }
  return { ok: true, text: lines.join('\n') };
}

/**
 * The format version a stored snapshot (as the snapshot machinery hands it back, serialised) was written with:
 * `'v1'`, `'v0'`, ... or null when it is not a sqltally count snapshot at all.
 */
export function storedSnapshotFormat(stored: unknown): string | null {
  if (typeof stored !== 'string') return null;
  const m = FORMAT_LINE.exec(stored);
  return m ? `v${m[1]}` : null;
}
