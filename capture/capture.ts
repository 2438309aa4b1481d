import { SqltallyError, truncateStatement } from '../containers/errors';
import { startBackend } from '../containers/registry';
import type { StartedBackend } from '../containers/types';
import type { DriverName } from '../counters/driver/names';
import { DriverTally, summarizeDriverEvents } from '../counters/driver-layer';
import { driversFor } from '../counters/driver/registry';
import { canPing, openRawConnection, pingConnection, runSql, wrapConnection, type DriverHandle, type OpenedConnection } from '../counters/driver/open';
import { createProbe, type ServerLayer, type ServerProbe, type WindowContext } from '../counters/probes';
import { startWireProxy, type WireProxy } from '../counters/wire/proxy';
import type { WireCounts } from '../counters/wire/types';
import { decideVerdict } from '../verdict/verdict';
import type { Tally, WorkloadError } from './tally';

/** How to capture: which backend, which driver, which layers. */
export interface CaptureOptions<D extends DriverName> {
  /** A backend id to start privately for this capture (`postgres`, `mariadb@10.11`), or one already started. */
  backend: string | StartedBackend;
  /** Defaults to the backend's first driver (mysql2 for MySQL/MariaDB, pg, better-sqlite3). */
  driver?: D;
  /** Passed to the driver as they are: mariadb `{ bulk: false }`, pg `{ pipeline: true }`. */
  driverOptions?: Record<string, unknown>;
  /** Load this package instead of the driver's own name: another release under an npm alias (`mariadb-3.3`). */
  driverPackage?: string;
  /** Route the connection through the counting wire proxy; default true where the backend has a wire protocol. */
  wire?: boolean;
  /** Read the server's counters around the window; default true. */
  server?: boolean;
  /** The table the workload writes: PostgreSQL reads its own counters from it. Defaults to `public`/none. */
  table?: { schema?: string; name: string };
}

/** A window's result: the tally, and what the user's function returned when it did not throw. */
export type Captured<T> = Tally & { result: T | undefined };

/** The connection a window runs on: counted handle for the workload, raw handle for the probe's own SQL. */
interface WorkloadConnection<D extends DriverName> {
  counted: DriverHandle<D>;
  opened: OpenedConnection<D>;
}

function errorOf(err: unknown): WorkloadError {
  if (err instanceof SqltallyError) {
    return { message: err.message, phase: err.phase, statement: err.statement ? truncateStatement(err.statement) : null };
  }
  const e = err as { message?: string; sql?: string };
  return { message: String(e?.message ?? err), phase: 'workload', statement: e?.sql ? truncateStatement(e.sql) : null };
}

/**
 * A backend, a driver and the three counters, kept open so several windows can run: each `measure` opens a fresh
 * counted connection (so a cached prepare never hides a count), or reuses the last one with `{ hot: true }`.
 * Connection set-up happens before the window and is never counted in it.
 */
export class CaptureSession<D extends DriverName> implements AsyncDisposable {
  readonly backend: StartedBackend;
  readonly driver: D;
  readonly #ownsBackend: boolean;
  readonly #options: CaptureOptions<D>;
  readonly #sink = new DriverTally();
  #proxy: WireProxy | null = null;
  #probe: ServerProbe | null = null;
  #probeError: string | null = null;
  #last: WorkloadConnection<D> | null = null;
  #closed = false;

  private constructor(backend: StartedBackend, owns: boolean, driver: D, options: CaptureOptions<D>) {
    this.backend = backend;
    this.#ownsBackend = owns;
    this.driver = driver;
    this.#options = options;
  }

  static async open<D extends DriverName>(options: CaptureOptions<D>): Promise<CaptureSession<D>> {
    const owns = typeof options.backend === 'string';
    const backend = typeof options.backend === 'string' ? await startBackend(options.backend) : options.backend;
    const allowed = driversFor(backend.description.name);
    const driver = (options.driver ?? allowed[0]) as D;
    const session = new CaptureSession(backend, owns, driver, options);
    try {
      if (!allowed.includes(driver)) {
        throw new SqltallyError(`driver ${driver} does not talk to ${backend.description.name}; use one of ${allowed.join(', ')}`, {
          backend: backend.description.id,
          phase: 'config',
        });
      }
      const protocol = backend.description.capabilities.wireProtocol;
      if (protocol && options.wire !== false && backend.connection.kind === 'network') {
        session.#proxy = await startWireProxy({
          protocol,
          target: { host: backend.connection.host, port: backend.connection.port },
        });
      }
      if (options.server !== false) {
        try {
          session.#probe = await createProbe(backend);
        } catch (err) {
          // A probe that cannot connect leaves the server layer out and says why: the verdict turns it into incomplete.
          session.#probeError = err instanceof Error ? err.message : String(err);
        }
      }
      return session;
    } catch (err) {
      await session.close();
      throw err;
    }
  }

  /** Opens a workload connection (through the proxy when on), runs `setup` uncounted, and keeps it for `hot` reuse. */
  async #connect(): Promise<WorkloadConnection<D>> {
    const opened = await openRawConnection(this.driver, this.backend.connection, {
      host: this.#proxy?.host,
      port: this.#proxy?.port,
      driverOptions: this.#options.driverOptions,
      backend: this.backend.description.id,
      ...(this.#options.driverPackage ? { driverPackage: this.#options.driverPackage } : {}),
    });
    return { opened, counted: wrapConnection(this.driver, opened.handle, this.#sink) };
  }

  /** Runs code on a fresh (or, with `hot`, the previous) connection before a window: DDL, warm-up. Uncounted. */
  async prepare(fn: (handle: DriverHandle<D>) => Promise<void>, opts: { hot?: boolean } = {}): Promise<void> {
    const conn = await this.#connection(opts.hot ?? false);
    await fn(conn.opened.handle);
  }

  async #connection(hot: boolean): Promise<WorkloadConnection<D>> {
    if (hot && this.#last) return this.#last;
    if (this.#last) await this.#last.opened.close();
    this.#last = await this.#connect();
    return this.#last;
  }

  /**
   * One counted window around `fn`. The server probe's control window runs first; the user's error, if any, is
   * kept in the tally (and makes the verdict incomplete) rather than thrown, so a matcher can show it.
   */
  async measure<T>(
    fn: (handle: DriverHandle<D>) => Promise<T>,
    opts: { hot?: boolean; around?: <R>(work: () => Promise<R>) => Promise<R> } = {},
  ): Promise<Captured<T>> {
    if (this.#closed) throw new SqltallyError('capture session already closed', { backend: this.backend.description.id, phase: 'workload' });
    const conn = await this.#connection(opts.hot ?? false);
    const context: WindowContext = {
      workloadConnectionIds: [conn.opened.connectionId ?? 0],
      table: this.#options.table ?? { name: '' },
      onWorkloadConnection: (sql) => runSql(this.driver, conn.opened.handle, sql),
    };
    if (canPing(this.driver)) context.pingWorkloadConnections = () => pingConnection(this.driver, conn.opened.handle);

    let probeError = this.#probeError;
    let window: Awaited<ReturnType<ServerProbe['begin']>> | null = null;
    if (this.#probe) {
      try {
        window = await this.#probe.begin(context);
      } catch (err) {
        probeError = `could not open the server window: ${(err as Error).message}`;
      }
    }
    const wireBefore = this.#proxy?.snapshot();
    const mark = this.#sink.mark();

    let result: T | undefined;
    let workloadError: WorkloadError | null = null;
    let durationNs = 0;
    // `around` (an event-loop delay recorder) sees the user's function alone, not the probe's windows.
    const timed = async () => {
      const started = process.hrtime.bigint();
      try {
        result = await fn(conn.counted);
      } catch (err) {
        workloadError = errorOf(err);
      }
      durationNs = Number(process.hrtime.bigint() - started);
    };
    await (opts.around ? opts.around(timed) : timed());
    // Taken before the probe closes its window: PostgreSQL's forced flush runs on this same connection, through the
    // proxy, and is the probe's traffic, not the workload's. The last answer has arrived, so the proxy saw it all.
    const wireAfter = this.#proxy?.snapshot();

    const events = this.#sink.since(mark);
    const driver = summarizeDriverEvents(events);
    // The layer keeps a capped list of calls for the report; the driver model must see every one of them.
    const modelled = driver.eventsOmitted > 0 ? summarizeDriverEvents(events, { maxEvents: events.length }) : driver;
    let server: ServerLayer | null = null;
    if (window) {
      try {
        server = await window.end();
      } catch (err) {
        probeError = `could not close the server window: ${(err as Error).message}`;
      }
    }
    const wire: WireCounts | null = this.#proxy && wireBefore && wireAfter ? this.#proxy.diff(wireBefore, wireAfter) : null;

    const verdict = decideVerdict({
      backend: this.backend.description,
      driverName: this.driver,
      driverOptions: this.#options.driverOptions as { bulk?: boolean } | undefined,
      driver: modelled,
      wire,
      server,
      workloadError,
      probeError,
    });
    return { backend: this.backend.description, driver: this.driver, layers: { driver, wire, server }, verdict, workloadError, durationNs, result };
  }

  /** Closes the workload connection, the probe, the proxy, and the backend when this session started it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const steps: (() => Promise<void>)[] = [
      async () => this.#last?.opened.close(),
      async () => this.#probe?.close(),
      async () => this.#proxy?.close(),
      async () => (this.#ownsBackend ? this.backend.stop() : undefined),
    ];
    for (const step of steps) {
      try {
        await step();
      } catch {
        // Best effort: one failed close must not leave the server running.
      }
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * Captures one window around the user's own code: starts (or reuses) a backend, hands `fn` a counted connection of
 * the chosen driver, and returns the three layers with a verdict. `setup` runs first on the same connection, uncounted.
 *
 * ```ts
 * const tally = await capture({ backend: 'postgres', driver: 'pg', table: { name: 'items' } }, async (client) => {
 *   await client.query('INSERT INTO items SELECT * FROM unnest($1::int[])', [[1, 2, 3]]);
 * }, { setup: (c) => c.query('CREATE TABLE items (id int)').then(() => undefined) });
 * expect(tally).toHaveCounts({ driver: { calls: 1 }, server: { rowsInserted: 3 } });
 * ```
 */
export async function capture<D extends DriverName, T>(
  options: CaptureOptions<D>,
  fn: (handle: DriverHandle<D>) => Promise<T>,
  hooks: { setup?: (handle: DriverHandle<D>) => Promise<void> } = {},
): Promise<Captured<T>> {
  const session = await CaptureSession.open(options);
  try {
    if (hooks.setup) await session.prepare(hooks.setup);
    return await session.measure(fn, { hot: !!hooks.setup });
  } finally {
    await session.close();
  }
}
