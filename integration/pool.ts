import path from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { forgetLive, liveResources } from '../src/backends/live';
import { DATADIR_PREFIX, runTag } from '../src/backends/local-process';
import { startBackend } from '../src/backends/registry';
import type { StartedBackend } from '../src/backends/types';
import { changedObjects, changedSettings, describeSession, HANDOVER } from './handover';
import type { ClientSession, HandoverSession, PooledHandover, ServerState } from './handover';
import { lentPart, type IntegrationBackend, type ServerLender } from './harness';

/**
 * Private servers started once per Jest worker, lent to one file after another and taken back only clean (else stopped);
 * a worker has too little time to exit to stop them, so global teardown does, by the run tag (`sqltally-<run>pool-`).
 */

/** Where the worker process keeps its pool, shared by the test environment and (in band) global teardown. */
const PROCESS_POOL_KEY = Symbol.for('sqltally.integration.serverPool');

/** Closing connections is asynchronous on every server: a session the last file ended may still be leaving. */
const SESSION_SETTLE_MS = 3_000;
const SESSION_POLL_MS = 25;
const EXIT_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
/** Room in the 24-character run tag for the pool's suffix. */
const POOL_TAG_CHARS = 20;

/** The run id pooled servers are started under: their directories are then `sqltally-<run>pool-...`. */
export function poolRunId(env: NodeJS.ProcessEnv = process.env): string {
  return `${runTag(env).slice(0, POOL_TAG_CHARS)}pool`;
}

/** `sqltally-<run>pool-`: the start of every private directory of a pooled server of this run. */
export function poolMarker(env: NodeJS.ProcessEnv = process.env): string {
  return `${DATADIR_PREFIX}${poolRunId(env)}-`;
}

/** A forked Jest worker (or a worker thread), as opposed to the Jest process running tests in band. */
function inJestWorker(): boolean {
  return typeof process.send === 'function' || !isMainThread;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Status = 'held' | 'returned' | 'idle';

interface PooledServer {
  id: string;
  started: StartedBackend;
  handover: PooledHandover;
  /** As it was when first started: every handover must leave it so. */
  baseline: ServerState;
  status: Status;
  /** The test file that holds it, or held it last. */
  holder: string;
}

export interface ServerPoolOptions {
  /** The run's environment; servers start in it under the pool's run id (see `poolRunId`). */
  env?: NodeJS.ProcessEnv;
  /** Starts a server (tests give a stand-in). */
  start?: (id: string) => Promise<StartedBackend>;
  /**
   * When this process exits or gets a terminating signal, tell every pooled server to shut down and leave the rest
   * to global teardown (`sweepPooledServers`). For a Jest worker's pool; elsewhere live.ts stops them at exit.
   */
  handOverAtExit?: boolean;
  /** How long client sessions may take to leave before they count as left open. */
  sessionSettleMs?: number;
}

/** `integration/x.test.ts` rather than the absolute path, for messages. */
function shortPath(file: string): string {
  return path.relative(path.resolve(__dirname, '..'), file) || file;
}

export class ServerPool {
  readonly #servers = new Map<string, PooledServer>();
  readonly #start: (id: string) => Promise<StartedBackend>;
  readonly #settleMs: number;
  #unhook: (() => void) | undefined;

  constructor(options: ServerPoolOptions = {}) {
    const env = options.env ?? process.env;
    this.#start = options.start ?? ((id) => startBackend(id, { ...env, SQLTALLY_RUN_ID: poolRunId(env) }));
    this.#settleMs = options.sessionSettleMs ?? SESSION_SETTLE_MS;
    if (options.handOverAtExit) this.#unhook = this.#installProcessHooks();
  }

  /** Running pooled servers, by id: for tests of the pool itself. */
  servers(): ReadonlyMap<string, StartedBackend> {
    return new Map([...this.#servers].map(([id, s]) => [id, s.started]));
  }

  /**
   * Lends the server for `id` to `holder` (a test file path), starting it if this process has none. A server
   * another file gave back is checked and reset first; a server still held by someone fails loudly.
   */
  async borrow(id: string, holder: string, handover: PooledHandover): Promise<StartedBackend> {
    const existing = this.#servers.get(id);
    if (existing?.status === 'held') {
      throw new Error(
        existing.holder === holder
          ? `${id} is already lent to another describe block of ${shortPath(holder)}: nested blocks on one backend need withBackend('${id}', { fresh: true }) for the inner one`
          : `${id} is still lent to ${shortPath(existing.holder)}: a pooled server is never shared by two files at once`,
      );
    }
    if (existing?.status === 'returned') {
      const problems = await this.#checkIn(existing);
      if (problems.length > 0) throw new Error(handoverMessage(existing, problems));
    }
    const idle = this.#servers.get(id);
    if (idle) {
      idle.status = 'held';
      idle.holder = holder;
      return idle.started;
    }
    const started = await this.#start(id);
    try {
      const baseline = await withSession(handover, started, (s) => s.state());
      this.#servers.set(id, { id, started, handover, baseline, status: 'held', holder });
    } catch (err) {
      await started.stop();
      throw err;
    }
    return started;
  }

  /** The holder's describe block is done; the server is checked when borrowed next or at `checkInAll`. */
  giveBack(id: string, holder: string): void {
    const server = this.#servers.get(id);
    if (server && server.holder === holder && server.status === 'held') server.status = 'returned';
  }

  /**
   * Checks every server `holder` had (given back or not: the file is over either way) and returns what was
   * wrong, one line per problem. A server with a problem is stopped and forgotten, so no other file gets it.
   */
  async checkInAll(holder: string): Promise<string[]> {
    const problems: string[] = [];
    for (const server of [...this.#servers.values()]) {
      if (server.holder !== holder || server.status === 'idle') continue;
      const found = await this.#checkIn(server);
      if (found.length > 0) problems.push(handoverMessage(server, found));
    }
    return problems;
  }

  /** Stops every pooled server in order (global teardown, when tests ran in the Jest process itself). */
  async close(): Promise<void> {
    const servers = [...this.#servers.values()];
    this.#servers.clear();
    const results = await Promise.allSettled(servers.map((s) => s.started.stop()));
    this.#unhook?.();
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [`${servers[i]?.id}: ${String(r.reason)}`] : []));
    if (failed.length > 0) throw new Error(`could not stop pooled servers:\n  ${failed.join('\n  ')}`);
  }

  /**
   * Without an event loop (process exit, a terminating signal): asks every pooled server to shut down, without
   * waiting, and forgets it, so live.ts's exit hook does not wait on it either. Global teardown finishes the job.
   */
  handOverAllSync(): void {
    const pids = new Set([...this.#servers.values()].map((s) => s.started.pid).filter((p): p is number => p !== undefined));
    for (const r of liveResources()) {
      if (r.pid === undefined || !pids.has(r.pid)) continue;
      forgetLive(r);
      signalQuietly(r.pid, r.stopSignal ?? 'SIGTERM');
    }
    this.#servers.clear();
  }

  async #checkIn(server: PooledServer): Promise<string[]> {
    server.status = 'idle';
    let problems: string[];
    try {
      problems = await withSession(server.handover, server.started, async (session) => {
        const left = await this.#settledSessions(session);
        if (left.length > 0) {
          return [`${left.length} client connection(s) still open: ${left.map(describeSession).join('; ')}; close every connection in afterAll/afterEach`];
        }
        const now = await session.state();
        const changed = changedSettings(server.baseline, now);
        if (changed.length > 0) {
          return [`server settings changed: ${changed.join('; ')}; a test that reconfigures its server needs withBackend('${server.id}', { fresh: true })`];
        }
        await session.reset(server.baseline);
        const after = await session.state();
        const notRestored = [...changedSettings(server.baseline, after), ...changedObjects(server.baseline, after)];
        return notRestored.length > 0 ? [`the reset did not restore the server: ${notRestored.join('; ')}`] : [];
      });
    } catch (err) {
      problems = [
        `the server did not answer the handover check (${err instanceof Error ? err.message : String(err)}); a test that stops or kills its server needs withBackend('${server.id}', { fresh: true })`,
      ];
    }
    if (problems.length > 0) {
      this.#servers.delete(server.id);
      await server.started.stop().catch((err: unknown) => problems.push(`stopping it failed too: ${String(err)}`));
    }
    return problems;
  }

  async #settledSessions(session: HandoverSession): Promise<ClientSession[]> {
    const deadline = Date.now() + this.#settleMs;
    let left = await session.clientSessions();
    while (left.length > 0 && Date.now() < deadline) {
      await sleep(SESSION_POLL_MS);
      left = await session.clientSessions();
    }
    return left;
  }

  #installProcessHooks(): () => void {
    const onExit = (): void => this.handOverAllSync();
    const onSignal = (signal: NodeJS.Signals): void => {
      this.handOverAllSync();
      unhook();
      // live.ts may still be listening: it cleans up the rest and re-raises. Alone, re-raise for the default exit.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    const listeners = EXIT_SIGNALS.map((signal) => [signal, () => onSignal(signal)] as const);
    process.on('exit', onExit);
    for (const [signal, listener] of listeners) process.on(signal, listener);
    const unhook = (): void => {
      process.off('exit', onExit);
      for (const [signal, listener] of listeners) process.off(signal, listener);
    };
    return unhook;
  }
}

async function withSession<T>(handover: PooledHandover, started: StartedBackend, use: (s: HandoverSession) => Promise<T>): Promise<T> {
  const session = await handover.open(started);
  try {
    return await use(session);
  } finally {
    await session.close();
  }
}

function handoverMessage(server: PooledServer, problems: string[]): string {
  return `pooled ${server.id} server (pid ${server.started.pid ?? '?'}) handed back dirty by ${shortPath(server.holder)}, so it was stopped: ${problems.join('; ')}`;
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** Only servers this machine starts privately are pooled; external ones cost nothing, containers clean up their own way. */
export function pooledHandover(b: IntegrationBackend): PooledHandover | undefined {
  if (!b.available || b.provider !== 'local') return undefined;
  const handover = HANDOVER[b.backend];
  return handover.pooled ? handover : undefined;
}

/** The pool of this process, created on first use (with the hand-over at exit when this is a Jest worker). */
export function processPool(): ServerPool {
  const holder = process as unknown as Record<symbol, ServerPool | undefined>;
  return (holder[PROCESS_POOL_KEY] ??= new ServerPool({ handOverAtExit: inJestWorker() }));
}

/** The pool of this process if one was ever made (global teardown stops it before looking for leaks). */
export function existingProcessPool(): ServerPool | undefined {
  return (process as unknown as Record<symbol, ServerPool | undefined>)[PROCESS_POOL_KEY];
}

/** The lender one test file sees: ids resolved by global setup decide what is pooled. */
export function lenderFor(pool: ServerPool, holder: string, backends: IntegrationBackend[]): ServerLender {
  const handovers = new Map(
    backends.flatMap((b) => {
      const h = pooledHandover(b);
      return h ? [[b.id, h] as const] : [];
    }),
  );
  return {
    lends: (id) => handovers.has(id),
    borrow: async (id) => {
      const handover = handovers.get(id);
      if (!handover) throw new Error(`${id} is not lent by the pool here`);
      const s = await pool.borrow(id, holder, handover);
      return JSON.stringify(lentPart(s));
    },
    giveBack: (id) => pool.giveBack(id, holder),
  };
}
