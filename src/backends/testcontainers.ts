import { describeBackend, startedBackend } from './backend';
import type { BackendModule, ContainerPlan, StartedContainer } from './backend';
import { SqltallyError } from '../shared/errors';
import type { NetworkConnection, StartedBackend } from './types';

const READY_TIMEOUT_MS = 120_000;
const READY_POLL_MS = 250;
const STARTUP_TIMEOUT_MS = 180_000;

/**
 * The image for a backend id: `SQLTALLY_<BACKEND>_IMAGE` for the plain id, else the pinned default; a variant id
 * (`postgres@16`) takes the default image's repository with the variant as tag, unless
 * `SQLTALLY_<BACKEND>_<VARIANT>_IMAGE` names one.
 */
export function imageFor(module: BackendModule, variant: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  if (!module.defaultImage) return undefined;
  const base = `SQLTALLY_${module.name.toUpperCase()}`;
  if (variant === undefined) return env[`${base}_IMAGE`] || module.defaultImage;
  const repository = module.defaultImage.replace(/:[^:/]*$/, '');
  return env[`${base}_${variant.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_IMAGE`] || `${repository}:${variant}`;
}

/** The container a backend will run, as data; `undefined` when the backend has no container form (sqlite). */
export function containerPlanFor(module: BackendModule, variant: string | undefined, env: NodeJS.ProcessEnv): ContainerPlan | undefined {
  const image = imageFor(module, variant, env);
  if (!image || !module.containerPlan) return undefined;
  return module.containerPlan(image);
}

/** What every builder sets beside the image and the backend's own credentials. */
interface PlannedContainer<T> {
  withDatabase(database: string): T;
  withCommand(command: string[]): T;
  withEnvironment(environment: Record<string, string>): T;
  withStartupTimeout(ms: number): T;
}

/** `container` with the plan's database, command and environment, and sqltally's startup timeout. */
export function withPlan<T extends PlannedContainer<T>>(container: T, plan: ContainerPlan): T {
  return container.withDatabase(plan.database).withCommand(plan.command).withEnvironment(plan.environment).withStartupTimeout(STARTUP_TIMEOUT_MS);
}

/** Builds the Testcontainers container from a plan, through the backend module's {@link ContainerBuilder}. */
export async function buildContainer(module: BackendModule, plan: ContainerPlan): Promise<{ start(): Promise<StartedContainer> }> {
  const builder = module.containerBuilder;
  if (!builder) throw new Error(`${module.name} has no container`);
  try {
    return await builder.build(plan);
  } catch (cause) {
    if ((cause as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND') {
      throw new SqltallyError(`Testcontainers for ${module.name} is not installed`, {
        backend: module.name,
        phase: 'start',
        provider: 'testcontainers',
        cause,
        hint: `npm install testcontainers ${builder.packageName} (optional peer dependencies of sqltally)`,
      });
    }
    throw cause;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Starts a fresh container (reuse is never turned on) and waits until a real query succeeds: a log line saying
 * "ready" comes before the server accepts the user we created on some images.
 */
export async function startContainer(module: BackendModule, plan: ContainerPlan, id: string): Promise<StartedBackend> {
  const context = { backend: id, provider: 'testcontainers' } as const;
  const t0 = process.hrtime.bigint();
  let container: StartedContainer;
  try {
    container = await (await buildContainer(module, plan)).start();
  } catch (cause) {
    throw new SqltallyError(`could not start container ${plan.image}`, {
      ...context,
      phase: 'start',
      cause,
      hint: 'check the image name and that the engine can pull it',
    });
  }
  const connection: NetworkConnection = {
    kind: 'network',
    host: container.getHost(),
    port: container.getMappedPort(plan.containerPort),
    user: plan.user,
    password: plan.password,
    database: plan.database,
  };
  const stop = async (): Promise<void> => {
    await container.stop();
  };
  try {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      try {
        await module.ping?.(connection);
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await sleep(READY_POLL_MS);
      }
    }
    const readyNs = process.hrtime.bigint() - t0;
    await module.prepare?.(connection);
    if (!module.identify) throw new Error(`${module.name} cannot identify itself`);
    const identity = await module.identify(connection);
    return startedBackend(describeBackend(module, identity, 'testcontainers', plan.image, readyNs, true), connection, stop, { containerId: container.getId() });
  } catch (cause) {
    await stop().catch(() => undefined);
    throw new SqltallyError(`container ${plan.image} never answered a query`, { ...context, phase: 'start', cause, statement: 'SELECT 1' });
  }
}
