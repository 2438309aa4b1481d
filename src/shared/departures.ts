/**
 * Connections sqltally's own code closed, by server address, across this process's sessions: a server lists a closed
 * session for a moment, so windows wait for these to leave (`WindowContext.departedConnectionIds`), the user's still show.
 */
import { mathMax } from '../shared/intrinsics';

/**
 * A departure older than this is not waited for: its server session left long ago, and a session listed under its
 * id now (PostgreSQL reuses backend pids) is someone else's.
 */
export const DEPARTED_RECENT_MS = 10_000;
/** Departures kept per server; past it the oldest go (a bound for a process that opens connections for hours). */
const MAX_PER_SERVER = 4096;

interface Departure {
  id: number;
  atNs: number;
}

const BY_SERVER = new Map<string, Departure[]>();

/** A server's address as a key, for every per-server registry of this process (own-connections.ts too). */
export function serverKey(server: { host: string; port: number }): string {
  return `${server.host}:${server.port}`;
}

function nowNs(): number {
  return Number(process.hrtime.bigint());
}

/** Notes that sqltally closed its connection `id` (the server's own id) to `server`, now or at `atNs`. */
export function noteDeparture(server: { host: string; port: number }, id: number, atNs: number = nowNs()): void {
  const key = serverKey(server);
  let list = BY_SERVER.get(key);
  if (!list) BY_SERVER.set(key, (list = []));
  const horizon = atNs - DEPARTED_RECENT_MS * 1e6;
  // Oldest first: drop what fell out of the horizon, and the oldest beyond the bound.
  let drop = 0;
  while (drop < list.length && list[drop]!.atNs < horizon) drop++;
  drop = mathMax(drop, list.length + 1 - MAX_PER_SERVER);
  if (drop > 0) list.splice(0, drop);
  list.push({ id, atNs });
}

/** Ids of connections to `server` that sqltally closed in the {@link DEPARTED_RECENT_MS} before `sinceNs`. */
export function departedBefore(server: { host: string; port: number }, sinceNs: number): number[] {
  const list = BY_SERVER.get(serverKey(server));
  if (!list) return [];
  const horizon = sinceNs - DEPARTED_RECENT_MS * 1e6;
  const ids = new Set<number>();
  for (const d of list) if (d.atNs < sinceNs && d.atNs >= horizon) ids.add(d.id);
  return [...ids];
}

/** Forgets every departure noted (tests). */
export function forgetDepartures(): void {
  BY_SERVER.clear();
}
