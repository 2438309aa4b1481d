import { startBackend } from '../src/backends/registry';
import type { BackendDescription, BackendName, ConnectionInfo, ProviderKind, StartedBackend } from '../src/backends/types';

/** Environment variable through which global setup hands its resolutions to every test file. */
export const RESOLVED_ENV = 'SQLTALLY_INTEGRATION_BACKENDS';
/** Starting a server on two busy cores can take a while. */
export const START_TIMEOUT_MS = 180_000;

/** One backend id as global setup resolved it: available with its provider, or skipped with a reason. */
export type IntegrationBackend =
  | { id: string; backend: BackendName; available: true; provider: ProviderKind; origin: string }
  | { id: string; backend: BackendName; available: false; reason: string };

export type AvailableIntegrationBackend = Extract<IntegrationBackend, { available: true }>;

/**
 * The backends this run covers (after `SQLTALLY_BACKENDS` filtering), read synchronously so test files can build
 * `describe` blocks from it: `for (const b of integrationBackends()) describe(b.id, ...)`.
 */
export function integrationBackends(): IntegrationBackend[] {
  const raw = process.env[RESOLVED_ENV];
  if (!raw) {
    throw new Error(
      `${RESOLVED_ENV} is not set: integration tests must run through jest.config.js, whose integration project's globalSetup resolves the backends`,
    );
  }
  return JSON.parse(raw) as IntegrationBackend[];
}

/**
 * Declares one `describe` per backend: real ones for available backends, a visible skipped block naming the
 * reason for the others (so a skip is never silent).
 */
export function describeEachBackend(body: (backend: AvailableIntegrationBackend) => void, only?: (b: IntegrationBackend) => boolean): void {
  const chosen = integrationBackends().filter((b) => !only || only(b));
  // A file for some backends only (faults/freeze.<backend>.test.ts) that this run leaves out says so: Jest refuses a
  // file without tests, and an empty one would pass in silence.
  if (chosen.length === 0) {
    it.skip(`no backend of this file is in this run (SQLTALLY_BACKENDS=${process.env['SQLTALLY_BACKENDS'] ?? ''})`, () => undefined);
    return;
  }
  for (const b of chosen) {
    if (b.available)
      describe(b.id, () => {
        const releases = collectReleases(() => body(b));
        // Declared after the body's own afterAll hooks, so it runs after them (Jest runs afterAll in declaration
        // order): the block's pools and sessions end before their server stops, whichever provider started it.
        afterAll(async () => {
          for (const release of releases.reverse()) await release();
        }, START_TIMEOUT_MS);
      });
    else
      describe.skip(`${b.id}: skipped: ${b.reason}`, () => {
        it('needs this backend', () => undefined);
      });
  }
}

/** What a test file gets from the worker's server pool: plain data, copied into the file's own realm. */
export interface LentBackend {
  description: BackendDescription;
  connection: ConnectionInfo;
  pid?: number;
  dataDir?: string;
  logFile?: string;
}

/** The plain-data part of a started server that crosses from the worker's pool to a test file. */
export function lentPart(s: Pick<StartedBackend, 'description' | 'connection' | 'pid' | 'dataDir' | 'logFile'>): LentBackend {
  return {
    description: s.description,
    connection: s.connection,
    ...(s.pid !== undefined ? { pid: s.pid } : {}),
    ...(s.dataDir !== undefined ? { dataDir: s.dataDir } : {}),
    ...(s.logFile !== undefined ? { logFile: s.logFile } : {}),
  };
}

/** The worker's server pool as one test file sees it (integration/pool.ts, set up by integration/environment.ts). */
export interface ServerLender {
  /** True if `id` is lent from the pool here; false means the harness starts a fresh server itself. */
  lends(id: string): boolean;
  /** A running server for `id`, started or reused, as JSON of a `LentBackend`. */
  borrow(id: string): Promise<string>;
  /** The describe block is done with it; the pool checks it when next borrowed or when the file ends. */
  giveBack(id: string): void;
}

/** Where withBackend puts its release while a describeEachBackend body is being declared; null outside one. */
let pendingReleases: (() => Promise<void>)[] | null = null;

/** Runs a describe body and returns the releases of the servers it asked for, in the order asked. */
function collectReleases(declare: () => void): (() => Promise<void>)[] {
  const outer = pendingReleases;
  const releases: (() => Promise<void>)[] = [];
  pendingReleases = releases;
  try {
    declare();
  } finally {
    pendingReleases = outer;
  }
  return releases;
}

/** The global through which the test environment hands a file its lender. */
export const LENDER_KEY = Symbol.for('sqltally.integration.serverLender');

export interface WithBackendOptions {
  /**
   * A private server for this describe block alone, started in `beforeAll` and stopped in `afterAll`: for tests
   * that stop, kill or reconfigure their server, or that test starting one.
   */
  fresh?: boolean;
  /** Resolve and start against this environment instead of the run's (always a fresh server). */
  env?: NodeJS.ProcessEnv;
}

function lender(): ServerLender | undefined {
  return (globalThis as unknown as Record<symbol, ServerLender | undefined>)[LENDER_KEY];
}

/** A lent server's handle: the pool stops it, so a test that tries gets told what to ask for instead. */
function lentHandle(id: string, json: string): StartedBackend {
  // Parsed here, so the objects belong to this file's realm (toEqual, instanceof Array) rather than the worker's.
  const lent = JSON.parse(json) as LentBackend;
  const refuse = async (): Promise<void> => {
    throw new Error(`${id} is lent by the worker's server pool and stops with it: a test that stops its server needs withBackend('${id}', { fresh: true })`);
  };
  return {
    ...lentPart(lent),
    stop: refuse,
    [Symbol.asyncDispose]: refuse,
  };
}

/**
 * A running server for the enclosing describe, from `beforeAll` on; the getter throws if used before that (or
 * after a failed start, whose error Jest already shows). Private servers started from local binaries come from
 * the worker's pool: started once per Jest worker, lent to one file at a time, checked clean (no connection left
 * open, no setting changed) and given an empty test database before the next file gets it. Everything else, and
 * every `{ fresh: true }` block, gets its own server, stopped in `afterAll`: in a describeEachBackend body, after
 * the body's own afterAll hooks, wherever they are declared.
 */
export function withBackend(id: string, options: WithBackendOptions = {}): () => StartedBackend {
  const pool = lender();
  const pooled = pool !== undefined && !options.fresh && options.env === undefined && pool.lends(id);
  let started: StartedBackend | undefined;
  beforeAll(async () => {
    started = pooled ? lentHandle(id, await pool.borrow(id)) : await startBackend(id, options.env ?? process.env);
  }, START_TIMEOUT_MS);
  const release = async (): Promise<void> => {
    if (pooled) {
      if (started) pool.giveBack(id);
    } else await started?.stop();
  };
  // Inside describeEachBackend the server is released after every afterAll of the block; elsewhere, declare the
  // block's own teardown before calling withBackend.
  if (pendingReleases) pendingReleases.push(release);
  else afterAll(release, START_TIMEOUT_MS);
  return () => {
    if (!started) throw new Error(`backend ${id} is not started (beforeAll failed or has not run)`);
    return started;
  };
}
