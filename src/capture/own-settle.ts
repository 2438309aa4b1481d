import { PROTOCOLS } from '../backends/protocols';
import type { WireProtocol } from '../wire/tally';
import type { DriverName } from '../shared/driver-names';
import { DRIVERS } from '../driver/registry';
import type { DriverHandle } from '../driver/open';

/** As long as the wire proxy gives a busy connection before calling it unsettled. */
const OWN_SETTLE_TIMEOUT_MS = 5_000;

/**
 * Settles the session's own connection when no wire proxy carries it (`wire: false`), the probe's `settle` hook.
 * MySQL/MariaDB file a statement in performance_schema only after answering it; the server answers one command
 * before it reads the next, so a ping answered on the same connection means the statement before it is filed (the
 * driver's ping is raw, never counted, and the probe leaves `statement/com/Ping` out). PostgreSQL needs no hook
 * here: without one the probe asks the session's connection for its own statistics flush (`onWorkloadConnection`).
 * Returns the connections that could not be settled, in words (empty when settled), as the proxy's settle does.
 */
export function ownConnectionSettle<D extends DriverName>(
  protocol: WireProtocol | null,
  driver: D,
  own: () => { handle: DriverHandle<D>; connectionId: number | null } | null,
  timeoutMs = OWN_SETTLE_TIMEOUT_MS,
): (() => Promise<string[]>) | null {
  if (!protocol || !PROTOCOLS[protocol].pingSettles) return null;
  const ping = DRIVERS[driver].ping as ((handle: DriverHandle<D>) => Promise<void>) | null;
  return async () => {
    const conn = own();
    // No session connection: the window has no connection of its own, so nothing of its own to settle.
    if (!conn) return [];
    const who = `connection #${conn.connectionId ?? '?'}`;
    if (!ping) return [`${who} (driver ${driver} has no ping to settle it with)`];
    let timer: NodeJS.Timeout | undefined;
    try {
      const answered = await Promise.race([
        ping(conn.handle).then(() => true),
        new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
      ]);
      return answered ? [] : [`${who} (its ping was not answered in ${timeoutMs} ms)`];
    } catch (err) {
      return [`${who} (its ping failed: ${err instanceof Error ? err.message : String(err)})`];
    } finally {
      clearTimeout(timer);
    }
  };
}
