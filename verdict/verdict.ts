import type { BackendDescription } from '../containers/types';
import type { DriverName } from '../counters/driver/names';
import type { DriverWindow } from '../counters/driver-layer';
import type { DriverLayer } from '../counters/events';
import type { ServerLayer } from '../counters/probes/types';
import type { WireCounts } from '../counters/wire/types';
import { reconcile, type DriverOptions } from './reconcile';
import type { Verdict } from './types';

/** Everything a verdict is decided from; layers that were not taken are null. */
export interface VerdictInput {
  backend: BackendDescription;
  driverName?: DriverName;
  driverOptions?: DriverOptions;
  driver: DriverLayer | null;
  /** The window's call groups from the recorder, when the caller has them (the layer's event list is capped). */
  driverWindow?: Pick<DriverWindow, 'groups' | 'insertedRows' | 'groupsIncomplete'>;
  wire: WireCounts | null;
  server: ServerLayer | null;
  /** The error the user's own code threw inside the window: shown as such, never as a count mismatch. */
  workloadError?: { message: string } | null;
  /** The probe itself failed (could not connect, threw): the server layer is missing for that reason. */
  probeError?: string | null;
}

const SESSIONS_SHOWN = 5;
const INFO_SHOWN = 80;

function list(items: string[]): string {
  const shown = items.slice(0, SESSIONS_SHOWN);
  return items.length > SESSIONS_SHOWN ? `${shown.join('; ')}; and ${items.length - SESSIONS_SHOWN} more` : shown.join('; ');
}

function counterList(counters: Record<string, number>): string {
  return Object.entries(counters)
    .map(([k, v]) => `${k} by ${v > 0 ? '+' : ''}${v}`)
    .join(', ');
}

/** Why the server-wide counters cannot be attributed to the workload alone, in words. Empty when they can. */
export function globalDisturbances(backend: BackendDescription, server: ServerLayer): string[] {
  const reasons: string[] = [];
  const residue = Object.fromEntries(
    Object.entries(server.control).filter(([k, v]) => v !== 0 && !k.startsWith('perConnection.')),
  );
  if (Object.keys(residue).length > 0) {
    reasons.push(`control window moved by ${counterList(residue)} after subtracting the probe cost: something else is talking to the server`);
  }
  if (server.foreignSessions.length > 0) {
    reasons.push(
      `other client connections seen: ${list(
        server.foreignSessions.map(
          (s) => `#${s.id} ${s.user ?? '?'}@${s.host ?? '?'} (${s.command ?? '?'}${s.info ? `: ${s.info.slice(0, INFO_SHOWN)}` : ''})`,
        ),
      )}`,
    );
  }
  if (server.connectionsOpened) {
    reasons.push(
      `${server.connectionsOpened} client connection(s) were opened during the window: a short-lived client may have come and gone between the session listings`,
    );
  }
  if (!server.canSeeOtherSessions) reasons.push('the account cannot see other sessions, so isolation cannot be verified');
  if (!backend.capabilities.privateServer) {
    reasons.push(`the server is not private to sqltally (provider ${backend.provider}): other clients may use it unseen`);
  }
  if (server.perConnection) {
    for (const pair of server.comparable ?? []) {
      const g = server.global[pair.global];
      const p = server.perConnection[pair.perConnection] ?? 0;
      if (g !== undefined && g !== p) {
        reasons.push(`global ${pair.global} differs from the workload connections' ${pair.perConnection} by ${g - p}`);
      }
    }
  }
  return reasons;
}

/**
 * assert: attributable (isolated server, or exact per-connection attribution). report: shown with the reason.
 * incomplete: the workload threw, a layer could not be read to the end, a probe failed, statistics did not settle.
 */
export function decideVerdict(input: VerdictInput): Verdict {
  const { backend, server } = input;
  const rec =
    input.driver && input.driverName
      ? reconcile({
          driverName: input.driverName,
          driverOptions: input.driverOptions,
          capabilities: backend.capabilities,
          driver: input.driver,
          ...(input.driverWindow ? { window: input.driverWindow } : {}),
          wire: input.wire,
          server: server?.summary ?? null,
        })
      : { reconciliation: [], discrepancies: [] };
  const verdict = (kind: Verdict['kind'], reason: string): Verdict => ({
    kind,
    reason,
    reconciliation: rec.reconciliation,
    discrepancies: rec.discrepancies,
  });

  if (input.workloadError) return verdict('incomplete', `the workload threw: ${input.workloadError.message}`);
  const incomplete: string[] = [];
  if (input.probeError) incomplete.push(`server probe failed: ${input.probeError}`);
  if (input.wire?.incomplete) incomplete.push(`wire layer incomplete: ${input.wire.incompleteReasons.join('; ') || 'no reason given'}`);
  if (server?.incomplete) incomplete.push(`server layer incomplete: ${server.incompleteReasons.join('; ') || 'no reason given'}`);
  if (incomplete.length > 0) return verdict('incomplete', incomplete.join('; '));
  if (!server) return verdict('report', 'no server layer was read: counts are not verified at the server');

  const background =
    server.backgroundSessions.length > 0
      ? ` (background threads set aside: ${list(server.backgroundSessions.map((s) => `${s.name} #${s.id}`))})`
      : '';
  const degraded = server.degraded ?? [];
  const disturbances = globalDisturbances(backend, server);

  const attribution = server.attribution;
  const perConnectionResidue = Object.entries(server.control).filter(([k, v]) => k.startsWith('perConnection.') && v !== 0);
  if (perConnectionResidue.length > 0) {
    disturbances.push(
      `the workload's own connections moved during the empty control window (${perConnectionResidue.map(([k, v]) => `${k} ${v}`).join(', ')})`,
    );
  }
  if (degraded.length > 0) return verdict('report', [...degraded, ...disturbances].join('; '));

  if (attribution?.exact && server.perConnection && perConnectionResidue.length === 0) {
    const how = `per-connection attribution (${attribution.method}) covers the workload's connection${
      attribution.requested.length === 1 ? '' : 's'
    } ${attribution.requested.map((id) => `#${id}`).join(', ')} exactly`;
    return verdict('assert', disturbances.length > 0 ? `${how}; the global counters alone would not be: ${disturbances.join('; ')}${background}` : `${how}${background}`);
  }
  if (attribution && !attribution.exact) {
    const missing = attribution.requested.filter((id) => !attribution.found.includes(id));
    disturbances.push(`per-connection attribution did not find the workload connection(s) ${missing.map((id) => `#${id}`).join(', ') || '(none given)'}`);
  }
  if (disturbances.length === 0) {
    return verdict('assert', `isolated: private server, control window 0 after the measured probe cost, no other client sessions${background}`);
  }
  return verdict('report', `${disturbances.join('; ')}${background}`);
}
