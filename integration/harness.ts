import { startBackend } from '../containers/registry';
import type { BackendName, ProviderKind, StartedBackend } from '../containers/types';

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
      `${RESOLVED_ENV} is not set: integration tests must run through jest.config.ts, whose integration project's globalSetup resolves the backends`,
    );
  }
  return JSON.parse(raw) as IntegrationBackend[];
}

/**
 * Declares one `describe` per backend: real ones for available backends, a visible skipped block naming the
 * reason for the others (so a skip is never silent).
 */
export function describeEachBackend(body: (backend: AvailableIntegrationBackend) => void, only?: (b: IntegrationBackend) => boolean): void {
  for (const b of integrationBackends()) {
    if (only && !only(b)) continue;
    if (b.available) describe(b.id, () => body(b));
    else
      describe.skip(`${b.id}: skipped: ${b.reason}`, () => {
        it('needs this backend', () => undefined);
      });
  }
}

/**
 * Starts the backend in `beforeAll` and stops it in `afterAll` of the enclosing describe; the getter throws if
 * used before start (or after a failed start, whose error Jest already shows).
 */
export function withBackend(id: string, env: NodeJS.ProcessEnv = process.env): () => StartedBackend {
  let started: StartedBackend | undefined;
  beforeAll(async () => {
    started = await startBackend(id, env);
  }, START_TIMEOUT_MS);
  afterAll(async () => {
    await started?.stop();
  }, START_TIMEOUT_MS);
  return () => {
    if (!started) throw new Error(`backend ${id} is not started (beforeAll failed or has not run)`);
    return started;
  };
}
