import { noteDeparture, serverKey } from '../shared/departures';

/**
 * The connections sqltally's own probes hold, by server address, across this process's sessions: two sessions on one
 * server see each other's probe. Only their presence is set aside; what they do still shows in the global counters.
 */
const OWN = new Map<string, Set<number>>();

/** Registers a probe's connection id; returns the function that removes it again. */
export function registerProbeConnection(server: { host: string; port: number }, id: number): () => void {
  const key = serverKey(server);
  let ids = OWN.get(key);
  if (!ids) OWN.set(key, (ids = new Set()));
  ids.add(id);
  return () => {
    // The probe closes its connection now: a window opened in the next moments waits for it to leave.
    if (ids.delete(id)) noteDeparture(server, id);
    if (ids.size === 0) OWN.delete(key);
  };
}

/** Whether `id` on `server` is a connection of one of sqltally's probes in this process. */
export function isProbeConnection(server: { host: string; port: number }, id: number): boolean {
  return OWN.get(serverKey(server))?.has(id) ?? false;
}
