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
   * The same for the workload's own per-connection counters: zero unless the probe touches the workload connection
   * itself (the MySQL ping before each reading moves its `Bytes_received`).
   */
  perConnection?: Record<string, number>;
  /** Empty windows measured. */
  pairs: number;
  /** Every pair gave the same numbers. An unstable cost cannot be subtracted, so the layer is then incomplete. */
  stable: boolean;
  /** Counters whose cost differed between pairs, with the values seen: why `stable` is false. */
  unstable: Record<string, number[]>;
}

/** What the probe needs to know about the workload before a window opens. */
export interface WindowContext {
  /** MySQL/MariaDB connection ids (`CONNECTION_ID()`), PostgreSQL backend pids; SQLite: `[0]` for the one handle. */
  workloadConnectionIds: number[];
  /** The workload's table: PostgreSQL reads its own counters, SQLite counts its rows. */
  table: { schema?: string; name: string };
  /**
   * Runs SQL on the workload's own connection and returns the rows. PostgreSQL needs it to force the writer's
   * statistics flush (only the writing session can); SQLite needs it because `total_changes()` is per connection.
   * Hand in the RAW handle, not a counted wrapper, or the probe's SQL shows in the driver layer.
   */
  onWorkloadConnection?: (sql: string) => Promise<unknown[]>;
  /**
   * Round-trips a no-op (MySQL `COM_PING`) on each workload connection before every reading. MySQL sends a
   * statement's OK before it files the statement in `performance_schema`, so a reading right after the client got
   * its answer can miss it; the server finishes one command before it reads the next, so a ping answered means the
   * previous statement is filed. `COM_PING` is not in `Questions`, and it is sent before every reading, calibration
   * included, so its bytes are part of the measured probe cost. The ping's own `statement/com/Ping` event is never
   * read: it is filed after its answer too, so whether a reading sees it depends on scheduling.
   */
  pingWorkloadConnections?: () => Promise<void>;
}

/** A measured window in progress; `end()` closes it and returns the server layer. */
export interface OpenWindow {
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
}
