import { CaptureSession } from '../capture/capture';
import { countRows } from '../capture/late-commits';
import { startBackend } from '../backends/registry';
import type { OpenCapture } from '../capture/capture';
import { chooseWire, proxyAfterFailedStart } from '../capture/wire-choice';
import type { WireChoice, WireRequest } from '../capture/wire-choice';
import { serverOffersTls } from '../backends/listener';
import { PassiveCaptureUnavailable } from '../wire/passive';
import { resolveCommand } from './child';
import { startControlEndpoint, WindowConflict } from '../capture/control';
import type { ControlEndpoint, ControlledWindow } from '../capture/control';
import type { Tally } from '../capture/tally';
import { SqltallyError } from '../shared/errors';
import type { StartedBackend } from '../backends/types';
import { collectEnvironment } from '../report/environment';
import { buildReport, failureOf } from '../report/output';
import { countsOfWindow, makeWindow } from '../report/schema';
import type { CommandRun, Counts, Environment, Failure, Report, Window } from '../report/schema';

/** A table the command writes: shown in the server layer, and counted through a fresh connection after a give-up. */
export type TableName = { schema?: string; name: string };

/** What the control endpoint answers when a window ends: the verdict first, then the counts the gate reads. */
export interface WindowAnswer {
  name: string;
  verdict: Window['verdict'];
  counts: Counts;
  window: Window;
}

/**
 * The windows of one `sqltally exec` or `proxy`: a capture session on the backend, the control endpoint driving it
 * (when asked for), and every window measured, one per name, as report entries.
 */
export class MeasuredWindows {
  readonly session: CaptureSession;
  /** How the wire layer is read, and why. */
  readonly wire: WireChoice;
  readonly environment: Environment;
  readonly startedAt = new Date().toISOString();
  readonly windows: Window[] = [];
  #endpoint: ControlEndpoint | null = null;
  /** Windows the endpoint has open, so that one the command never ended can still be closed and reported. */
  readonly #open = new Map<string, { open: OpenCapture; started: bigint }>();
  /** Why the control endpoint may not begin a window now, or null when it may. */
  #beginRefused: string | null = null;

  readonly #table: TableName | undefined;
  /** Started here, so that it outlives the session: late rows are counted once the proxy has cut the clients. */
  readonly #ownBackend: StartedBackend | null;

  private constructor(session: CaptureSession, wire: WireChoice, environment: Environment, table: TableName | undefined, ownBackend: StartedBackend | null) {
    this.session = session;
    this.wire = wire;
    this.environment = environment;
    this.#table = table;
    this.#ownBackend = ownBackend;
  }

  /**
   * Starts (or takes) the backend and a capture session on it, its wire read as `wire` asks; `across` says why
   * clients may keep connections open across windows (named windows, the long-lived proxy), which `auto` honours.
   */
  static async open(
    backend: string | StartedBackend,
    table: TableName | undefined,
    wire: WireRequest = 'proxy',
    across: string | null = null,
  ): Promise<MeasuredWindows> {
    const environment = collectEnvironment();
    const started = typeof backend === 'string' ? await startBackend(backend) : backend;
    try {
      let { choice, tcpdump } = await wireFor(started, wire, across);
      // The measured work is another process's: nothing this process starts in a window is the command's work.
      const open = (capture: WireChoice['capture']): Promise<CaptureSession> =>
        CaptureSession.open({
          backend: started,
          deferredWork: false,
          wireCapture: capture === 'passive' ? 'passive' : 'proxy',
          // The tcpdump found is the one run.
          ...(tcpdump ? { tcpdump } : {}),
          ...(table ? { table } : {}),
        });
      let session: CaptureSession;
      try {
        session = await open(choice.capture);
      } catch (err) {
        // Whether tcpdump may capture is known only by starting it: auto then falls back, naming why.
        if (!(wire === 'auto' && err instanceof PassiveCaptureUnavailable)) throw err;
        choice = proxyAfterFailedStart(err.why);
        tcpdump = null;
        session = await open(choice.capture);
      }
      return new MeasuredWindows(session, choice, environment, table, typeof backend === 'string' ? started : null);
    } catch (err) {
      if (typeof backend === 'string') await started.stop().catch(() => undefined);
      throw err;
    }
  }

  get endpoint(): ControlEndpoint | null {
    return this.#endpoint;
  }

  /** Starts the control endpoint; `refuse` says why it may not begin windows (exec measures the whole command). */
  async startEndpoint(refuse: string | null): Promise<ControlEndpoint> {
    this.#beginRefused = refuse;
    this.#endpoint = await startControlEndpoint({ begin: (name) => this.#begin(name) });
    return this.#endpoint;
  }

  async #begin(name: string): Promise<ControlledWindow> {
    if (this.#beginRefused) throw new WindowConflict(this.#beginRefused);
    const started = process.hrtime.bigint();
    const open: OpenCapture = await this.session.begin();
    this.#open.set(name, { open, started });
    return {
      end: async () => {
        const tally = await open.end();
        this.#open.delete(name);
        return this.#answer(this.record(name, 'control', tally, Number(process.hrtime.bigint() - started)));
      },
    };
  }

  /**
   * Ends what the endpoint still has open when the command exited, or sqltally was stopped, before ending it: the
   * window is given up (`incomplete`, its end is not the command's), what its connections still ran is cancelled and,
   * with `--table`, the rows that committed anyway are counted; its entry says why.
   */
  async endOpenWindows(why: string): Promise<string[]> {
    await this.#endpoint?.close();
    const names = [...this.#open.keys()];
    for (const name of names) {
      const { open, started } = this.#open.get(name)!;
      this.#open.delete(name);
      const message = `window "${name}" was not ended: ${why}`;
      const tally = await open.giveUp(message);
      this.record(name, 'control', tally, Number(process.hrtime.bigint() - started), { message, phase: 'workload' });
    }
    return names;
  }

  #answer(w: Window): WindowAnswer {
    return { name: w.name, verdict: w.verdict, counts: countsOfWindow(w), window: w };
  }

  /** One window's tally as a report entry; kept in this run's list. */
  record(name: string, source: Window['source'], tally: Tally, durationNs: number, error?: Window['error']): Window {
    const b = tally.backend;
    const workload = tally.workloadError;
    const failed =
      error ?? (workload ? { message: workload.message, phase: workload.phase, ...(workload.statement ? { statement: workload.statement } : {}) } : undefined);
    const entry = makeWindow({
      backend: b.id,
      backendName: b.name,
      serverVersion: b.serverVersion,
      flavour: b.flavour,
      name,
      environment: this.environment.id,
      source,
      layers: tally.layers,
      verdict: tally.verdict,
      beyondWindow: tally.beyondWindow,
      ...(failed ? { error: failed } : {}),
      ...(tally.lateCommits ? { lateCommits: tally.lateCommits } : {}),
      durationNs: Math.max(0, Math.round(durationNs)),
    });
    if (this.windows.some((w) => w.key === entry.key)) {
      throw new SqltallyError(`window "${name}" is measured twice`, { backend: b.id, phase: 'report', hint: 'give each window its own name' });
    }
    this.windows.push(entry);
    return entry;
  }

  /**
   * Counts `--table` again, once, for the windows that were given up: their own count after the give-up may have
   * been taken while a client was still writing (a process dying, a connection the proxy had not cut yet).
   */
  async #recountLateCommits(): Promise<void> {
    const table = this.#table;
    const given = this.windows.flatMap((entry, i) => (entry.lateCommits ? [{ entry, i, late: entry.lateCommits }] : []));
    if (!table || given.length === 0) return;
    const when = 'once every client was gone (the command stopped, the proxy closed)';
    let now: number | null = null;
    let failed: string | null = null;
    try {
      now = await countRows(this.session.backend, table);
    } catch (err) {
      failed = err instanceof Error ? err.message : String(err);
    }
    for (const { entry, i, late } of given) {
      if (now === late.rowsAfterwards) continue;
      const where = `counted through a fresh connection ${when} (${now} in the table)`;
      // Without a count at the give-up (SQLite busy under the writer, a server slow to answer) the rows are known, not when they committed.
      const lateCommits =
        now === null
          ? { ...late, summary: `${late.summary}; counting ${table.name} ${when} failed: ${failed}` }
          : late.rowsAtGiveUp === null
            ? { ...late, rowsAfterwards: now, summary: `${late.summary}; ${where}; how many committed after the give-up is unknown` }
            : {
                ...late,
                rowsAfterwards: now,
                rowsCommittedAfterGivingUp: now - late.rowsAtGiveUp,
                summary: `${late.summary}; ${now - late.rowsAtGiveUp} row(s) committed to ${table.name} after the give-up in all, ${where}`,
              };
      this.windows[i] = makeWindow(stripKey({ ...entry, lateCommits }));
    }
  }

  /** The report of this run, in the report schema `sqltally gate` reads. */
  report(command: CommandRun, failure: Failure | null): Report {
    const d = this.session.backend.description;
    return buildReport({
      status: failure ? 'failed' : 'ok',
      ...(failure ? { failure } : {}),
      matrix: { backends: [d.id], strategies: [], rows: [], hotRows: [], warmups: 0, repeats: 0 },
      environments: [this.environment],
      backends: [d],
      skipped: [],
      cells: [],
      windows: this.windows,
      command,
      startedAt: this.startedAt,
      finishedAt: new Date().toISOString(),
    });
  }

  /** Closes the endpoint and the session (and the backend, when the session started it). */
  async close(): Promise<Failure | null> {
    let failure: Failure | null = null;
    try {
      await this.endOpenWindows('sqltally closed the session');
      await this.session.close();
    } catch (err) {
      failure = failureOf(err);
    }
    // The session's proxy is closed now, its clients cut: what they had running has committed or failed.
    await this.#recountLateCommits();
    await this.#ownBackend?.stop().catch((err: unknown) => (failure ??= failureOf(err)));
    return failure;
  }
}

/**
 * What reads the wire layer of `backend`: asked for by name, or chosen from what can be known before capturing; and,
 * when auto chose the capture, the tcpdump it found.
 */
async function wireFor(backend: StartedBackend, wire: WireRequest, across: string | null): Promise<{ choice: WireChoice; tcpdump: string | null }> {
  const c = backend.connection;
  const protocol = backend.description.capabilities.wireProtocol;
  if (c.kind !== 'network' || !protocol)
    return { choice: { requested: wire, capture: 'none', reason: `${backend.description.id} runs in-process: no wire` }, tcpdump: null };
  if (wire !== 'auto') return { choice: { requested: wire, capture: wire, reason: `--wire ${wire}` }, tcpdump: null };
  const tcpdump = resolveCommand('tcpdump', process.env);
  const facts = {
    windowsAcrossConnections: across,
    host: c.host,
    privateServer: backend.description.capabilities.privateServer,
    serverProcessHere: backend.description.provider === 'local',
    tcpdump: tcpdump.ok ? tcpdump.file : null,
  };
  // TLS is the last question, and the only one asked of the server itself (sqltally starts its own without it).
  const withoutTls = chooseWire(wire, { ...facts, tlsOffered: false });
  if (withoutTls.capture !== 'passive') return { choice: withoutTls, tcpdump: null };
  return { choice: chooseWire(wire, { ...facts, tlsOffered: await serverOffersTls(c.host, c.port, protocol) }), tcpdump: facts.tcpdump };
}

function stripKey(w: Window): Omit<Window, 'key'> {
  const { key: _key, ...rest } = w;
  return rest;
}
