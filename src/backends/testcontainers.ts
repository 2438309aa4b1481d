import { describeBackend, startedBackend } from './backend';
import type { BackendModule, ContainerPlan } from './backend';
import { SqltallyError } from '../shared/errors';
import type { BackendName, NetworkConnection, StartedBackend } from './types';

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

interface StartedContainer {
  getId(): string;
  getHost(): string;
  getMappedPort(port: number): number;
  stop(): Promise<unknown>;
}

type ContainerBuilder = (plan: ContainerPlan) => Promise<{ start(): Promise<StartedContainer> }>;

/**
 * How each backend's plan becomes a Testcontainers container, loaded lazily (Testcontainers is an optional peer
 * dependency) and only once an engine has answered. Keyed by backend so a new one cannot be forgotten.
 */
const CONTAINER_BUILDERS = {
  async mysql(plan) {
    const { MySqlContainer } = await import('@testcontainers/mysql');
    return new MySqlContainer(plan.image)
      .withDatabase(plan.database)
      .withRootPassword(plan.password)
      .withCommand(plan.command)
      .withEnvironment(plan.environment)
      .withStartupTimeout(STARTUP_TIMEOUT_MS);
  },
  async mariadb(plan) {
    const { MariaDbContainer } = await import('@testcontainers/mariadb');
    return new MariaDbContainer(plan.image)
      .withDatabase(plan.database)
      .withRootPassword(plan.password)
      .withCommand(plan.command)
      .withEnvironment(plan.environment)
      .withStartupTimeout(STARTUP_TIMEOUT_MS);
  },
  async postgres(plan) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    return new PostgreSqlContainer(plan.image)
      .withDatabase(plan.database)
      .withUsername(plan.user)
      .withPassword(plan.password)
      .withCommand(plan.command)
      .withEnvironment(plan.environment)
      .withStartupTimeout(STARTUP_TIMEOUT_MS);
  },
  sqlite: null,
} satisfies Record<BackendName, ContainerBuilder | null>;

/** Builds the Testcontainers container from a plan (see {@link CONTAINER_BUILDERS}). */
export async function buildContainer(name: BackendName, plan: ContainerPlan): Promise<{ start(): Promise<StartedContainer> }> {
  const build: ContainerBuilder | null = CONTAINER_BUILDERS[name];
  if (!build) throw new Error(`${name} has no container`);
  try {
    return await build(plan);
  } catch (cause) {
    if ((cause as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND') {
      throw new SqltallyError(`Testcontainers for ${name} is not installed`, {
        backend: name,
        phase: 'start',
        provider: 'testcontainers',
        cause,
        hint: `npm install testcontainers @testcontainers/${name === 'postgres' ? 'postgresql' : name} (optional peer dependencies of sqltally)`,
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
    container = await (await buildContainer(module.name, plan)).start();
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
