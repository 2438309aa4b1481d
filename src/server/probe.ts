import type { ServerLayer } from './types';

/**
 * What one empty window costs in each tracked counter, measured on this server by back-to-back snapshots.
 * Reported, never hard-coded: `SHOW GLOBAL STATUS` counts itself in `Questions`, a PostgreSQL probe's own
 * transactions show in `xact_commit`, and the amounts differ between servers.
 */
export interface ProbeCost {
  /** Per counter: what one snapshot-to-snapshot interval moves with nothing else happening. */
  counters: Record<string, number>;
  /**
   * The same for the window connections' own counters, summed: 0 everywhere, or the probe disturbs what it measures
   * (and the layer is incomplete). The settle request the wire proxy sends before each reading (a MySQL `COM_PING`)
   * is kept out of the per-connection counters for that reason.
   */
  perConnection?: Record<string, number>;
  /** What reading one closing connection's own counters costs in the global counters (see `OpenWindow.retire`). */
  retireRead?: Record<string, number>;
  /** Empty windows measured. */
  pairs: number;
  /** Every pair gave the same numbers. An unstable cost cannot be subtracted, so the layer is then incomplete. */
  stable: boolean;
  /** Counters whose cost differed between pairs, with the values seen: why `stable` is false. */
  unstable: Record<string, number[]>;
}

/** What the probe needs to know about the workload's connections; read again at every snapshot. */
export interface WindowContext {
  /**
   * The window's connections by the server's own id: MySQL/MariaDB connection ids, PostgreSQL backend pids, SQLite
   * the session's numbers for its counted handles. A function for a pool, whose set changes during the window: it
   * is read at every snapshot, and a connection that appears after the start counts from 0.
   */
  workloadConnectionIds: readonly number[] | (() => readonly number[]);
  /** A table the workload writes, for the rows committed after a timeout; PostgreSQL counts every user table anyway. */
  table?: { schema?: string; name: string };
  /**
   * Runs SQL on one of the window's own connections and returns the rows. SQLite needs it because `total_changes()`
   * is per connection; PostgreSQL before a wire proxy existed used it to force the writer's statistics flush. Hand
   * in RAW handles, not counted wrappers, or the probe's SQL shows in the driver layer. Without `connectionId`, the
   * only (first) connection.
   */
  onWorkloadConnection?: (sql: string, connectionId?: number) => Promise<unknown[]>;
  /**
   * Makes the server's own bookkeeping current on every window connection before a reading, and says which could
   * not be settled (still busy). The wire proxy sends each quiet connection a request of its own: MySQL files a
   * statement in performance_schema only after answering it (an answered `COM_PING` means the one before is filed);
   * a PostgreSQL session flushes its statistics only when it asks for it itself.
   */
  settle?: () => Promise<string[]>;
  /**
   * Server ids of connections sqltally closed on this server shortly before this window: the workload's through the
   * wire proxy (it saw them go), another session's, a probe's, its own table resets and row checks (departures.ts). A server
   * lists such a session for a few milliseconds more (a PostgreSQL backend exits only after it has read Terminate,
   * and its entry in pg_stat_activity goes last), and one still listed at the window's start would count as a client
   * around the proxy: `begin` waits for them to leave before its control window (see `DEPARTURE_WAIT_MS`).
   */
  departedConnectionIds?: () => readonly number[];
  /**
   * The window's connections cannot be held open to be read as they close (a passive wire capture): when the only
   * connections missing at the end closed inside the window, the per-connection counters are set aside, with a note,
   * and the server-wide counters are the layer, as on a server without per-connection counters.
   */
  closingUnread?: boolean;
}

/** How a window connection left (see {@link OpenWindow.retire}). */
export interface Goodbye {
  /** It said the protocol's quit command (COM_QUIT, Terminate). */
  quit: boolean;
  /** It had already closed on the server (a passive capture saw it go): nothing is read, and its `quit` still counts. */
  gone?: boolean;
}

/** A measured window in progress; `end()` closes it and returns the server layer. */
export interface OpenWindow {
  /**
   * A window connection is about to close: read its own counters now, while the server still has them, and use them
   * as its final values (a pool that shrinks inside the window would otherwise lose them). Call after settling it.
   * `quit`: it said goodbye with the protocol's quit command (COM_QUIT, Terminate), which the server receives after
   * this read and may count (MySQL and MariaDB count a COM_QUIT in `Questions`). Once `end()` has begun, a retire
   * reads nothing: it resolves when the end is done, whose snapshot read the connection while it was still open
   * (hold its goodbye until then).
   */
  retire(connectionId: number, goodbye?: Goodbye): Promise<void>;
  /** Waits for retires under way, then takes the end snapshot; later calls return the same layer. */
  end(): Promise<ServerLayer>;
}

/**
 * Reads the server's own counters around a workload, on its own connection. Calibrate once, then
 * `begin` runs an empty control window first (its residue lands in `ServerLayer.control`) and opens the measured
 * window; `end` subtracts the measured probe cost. A probe never throws for a counter it cannot read: the layer
 * says `incomplete` or carries a note, so a verdict can say why.
 */
export interface ServerProbe extends AsyncDisposable {
  /** Takes several empty windows back to back and keeps their common cost (see {@link ProbeCost}). */
  calibrate(ctx: WindowContext): Promise<ProbeCost>;
  /** Control window, then the start of the measured window. Calibrates first when `calibrate` was not called. */
  begin(ctx: WindowContext): Promise<OpenWindow>;
  /** Closes the probe's own connection; idempotent. */
  close(): Promise<void>;
}

/** Options every probe understands. */
export interface ProbeOptions {
  /** Empty windows used by `calibrate`. At least 2 so that stability means something. */
  calibrationPairs?: number;
  /** PostgreSQL before 15 has no forced flush: the longest wait for statistics before the layer is incomplete. */
  settleTimeoutMs?: number;
  /** Read the server-work counters at the window's edges (default true); off, the layer has no work section. */
  serverWork?: boolean;
}

/** The window's connection ids at this moment, sorted and without duplicates. */
export function connectionIdsOf(ctx: WindowContext): number[] {
  const ids = typeof ctx.workloadConnectionIds === 'function' ? ctx.workloadConnectionIds() : ctx.workloadConnectionIds;
  return [...new Set(ids)].sort((a, b) => a - b);
}
