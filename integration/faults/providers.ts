import fs from 'node:fs';
import { processAlive } from '../../src/backends/live';
import type { ProviderKind, StartedBackend } from '../../src/backends/types';
import { allThreadsStopped, signalServer, thawQuietly } from './fixture';

/**
 * Whether a test applies to servers from a provider: it runs, or it is a visible `NOT_SUPPORTED` skip saying why.
 * Tables of these are keyed by every provider, like the backend tables, so a new provider must be decided on.
 */
export type ProviderRule = 'runs' | { notSupported: string };
export type ProviderTable = Record<ProviderKind, ProviderRule>;

/** The provider a run gives `backend`, as global setup resolved it (`undefined` for a skipped backend). */
export type ProviderOf = { provider: ProviderKind };

/** `it(title, body)` when `table` lets this provider run it, else `it.skip` naming the provider and the reason. */
export function itForProvider(b: ProviderOf, table: ProviderTable, title: string, body: () => Promise<void>, timeout?: number): void {
  const rule = table[b.provider];
  if (rule === 'runs') it(title, body, timeout);
  else it.skip(`${title}: NOT_SUPPORTED on ${b.provider}: ${rule.notSupported}`, () => undefined);
}

/**
 * A test whose fault is done to the client side (its process, its pool, its connections through the proxy) or to
 * what any server does with a statement: where the server runs does not change it.
 */
export const EVERY_PROVIDER: ProviderTable = { local: 'runs', testcontainers: 'runs', external: 'runs', embedded: 'runs' };

/** A server stopped by a fault: whether it was seen stopped, and how to undo it. */
export interface FrozenServer {
  /** Every process of the server seen stopped (local: every thread in state T; engine: the container paused). */
  stopped: boolean;
  /** What was frozen, for a failure message: pids, or the container. */
  what: string;
  /** Continues whatever is still there, and waits until the server is gone or running again. */
  thaw(): Promise<void>;
}

/** What a fault test does to a server, through whatever runs it. */
export interface ServerControl {
  /** SIGKILL of every process of the server. */
  kill(): Promise<void>;
  /** Stops every process of the server, and says whether it saw them stopped within 2 s. */
  freeze(): Promise<FrozenServer>;
  /** True once nothing of the server runs any more (waits up to `ms`). */
  gone(ms?: number): Promise<boolean>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function localControl(s: StartedBackend): ServerControl {
  const pid = s.pid;
  if (pid === undefined) throw new Error(`${s.description.id} came from the local provider but has no server pid`);
  let all: number[] = [pid];
  return {
    kill: async () => {
      all = [...new Set([...all, ...signalServer(pid, 'SIGKILL')])];
    },
    freeze: async () => {
      const frozen = signalServer(pid, 'SIGSTOP');
      all = [...new Set([...all, ...frozen])];
      return { stopped: await allThreadsStopped(frozen), what: `pids ${frozen.join(', ')}`, thaw: () => thawQuietly(frozen) };
    },
    gone: async (ms = 5_000) => {
      const deadline = Date.now() + ms;
      while (all.some((p) => processAlive(p)) && Date.now() < deadline) await sleep(50);
      return !all.some((p) => processAlive(p));
    },
  };
}

/** The container through the engine that runs it (Testcontainers' own client: DOCKER_HOST, its config). */
async function container(s: StartedBackend) {
  const id = s.containerId;
  if (id === undefined) throw new Error(`${s.description.id} came from Testcontainers but has no container id`);
  const { getContainerRuntimeClient } = await import('testcontainers');
  const client = await getContainerRuntimeClient();
  return { id: id.slice(0, 12), handle: client.container.getById(id) };
}

/** Whether this machine's process `pid` runs in the container: its cgroup path names the container's id. */
function inContainer(pid: number, containerId: string): boolean {
  try {
    return containerId.length > 0 && fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(containerId);
  } catch {
    return false;
  }
}

/** The container's state, or null once the engine no longer has it. */
async function containerState(s: StartedBackend): Promise<{ Running: boolean; Paused: boolean } | null> {
  const c = await container(s);
  try {
    return (await c.handle.inspect()).State;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return null;
    throw err;
  }
}

/**
 * `docker kill -s KILL` through the engine; a freeze by the container's host pids (from `docker inspect`) when the
 * engine runs here, else `docker pause` / `unpause`, so a remote engine works too.
 */
function engineControl(s: StartedBackend): ServerControl {
  return {
    kill: async () => {
      const c = await container(s);
      // The engine resumes a paused container after delivering the signal, so a frozen server dies too.
      await c.handle.kill({ signal: 'KILL' });
    },
    freeze: async () => {
      const c = await container(s);
      // An engine on this machine: the container's own processes, by their host pids, stop at once. `docker pause`
      // (the cgroup freezer) took long enough on two busy cores for the run to give up before the freeze held.
      const hostPid = (await c.handle.inspect()).State.Pid;
      if (hostPid > 0 && inContainer(hostPid, s.containerId ?? '')) {
        const frozen = signalServer(hostPid, 'SIGSTOP');
        return { stopped: await allThreadsStopped(frozen), what: `container ${c.id}, host pids ${frozen.join(', ')}`, thaw: () => thawQuietly(frozen) };
      }
      // A remote engine: its processes are not ours to signal, so the engine freezes them.
      await c.handle.pause();
      const state = await containerState(s);
      return {
        stopped: state?.Paused === true,
        what: `container ${c.id}`,
        thaw: async () => {
          const now = await containerState(s).catch(() => null);
          if (now?.Paused) await c.handle.unpause().catch(() => undefined);
        },
      };
    },
    gone: async (ms = 5_000) => {
      const deadline = Date.now() + ms;
      for (;;) {
        const state = await containerState(s);
        if (!state?.Running) return true;
        if (Date.now() > deadline) return false;
        await sleep(100);
      }
    },
  };
}

/**
 * How a fault reaches a server, by the provider that started it. A server sqltally did not start (a URL) is never
 * struck; SQLite has no server.
 */
export const SERVER_CONTROL = {
  local: { control: localControl },
  testcontainers: { control: engineControl },
  external: { notSupported: "a server reached through SQLTALLY_<BACKEND>_URL is someone else's: sqltally never kills or freezes it" },
  embedded: { notSupported: 'SQLite runs in-process (better-sqlite3): there is no server process to kill or freeze' },
} satisfies Record<ProviderKind, { control: (s: StartedBackend) => ServerControl } | { notSupported: string }>;

/** The rule for a test that kills or freezes its server, from {@link SERVER_CONTROL}. */
export const STRIKES_SERVER: ProviderTable = Object.fromEntries(
  Object.entries(SERVER_CONTROL).map(([p, c]) => [p, 'control' in c ? 'runs' : { notSupported: c.notSupported }]),
) as ProviderTable;

/** The control for a started server; throws for a provider {@link STRIKES_SERVER} does not run. */
export function serverControl(s: StartedBackend): ServerControl {
  const entry: { control: (s: StartedBackend) => ServerControl } | { notSupported: string } = SERVER_CONTROL[s.description.provider];
  if (!('control' in entry)) throw new Error(`${s.description.id}: NOT_SUPPORTED on ${s.description.provider}: ${entry.notSupported}`);
  return entry.control(s);
}
