import { describeBackend, startedBackend } from './backend';
import type { BackendModule } from './backend';
import { CAPABILITIES } from './capabilities';
import { SqltallyError } from '../shared/errors';
import { DEFAULT_DIAGNOSIS_TIMEOUT_MS, diagnoseListener } from './listener';
import type { WireProtocol } from './listener';
import { PROTOCOLS } from './protocols';
import type { NetworkConnection, StartedBackend } from './types';

/** Driver error codes that mean "your credentials", "your host/port" and "your database name". */
const ACCESS_DENIED = new Set(['ER_ACCESS_DENIED_ERROR', 'ER_DBACCESS_DENIED_ERROR', '28P01', '28000']);
const UNREACHABLE = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET']);
const NO_DATABASE = new Set(['ER_BAD_DB_ERROR', '3D000']);

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  // mysql2 reports a failed connect timeout without a code; pg says so in the message.
  const message = err instanceof Error ? err.message : '';
  return /timeout|timed out/i.test(message) ? 'ETIMEDOUT' : undefined;
}

/** Turns a driver's connect failure into one message naming the backend, the URL (redacted) and what to do. */
export function explainConnectFailure(cause: unknown, id: string, variable: string, origin: string, connection: NetworkConnection): SqltallyError {
  const code = errorCode(cause);
  const context = { backend: id, phase: 'connect' as const, provider: 'external', cause };
  if (code && ACCESS_DENIED.has(code)) {
    return new SqltallyError(`access denied for user "${connection.user}" at ${origin}`, { ...context, hint: `check the user and password in ${variable}` });
  }
  if (code && NO_DATABASE.has(code)) {
    return new SqltallyError(`database "${connection.database}" does not exist at ${origin}`, {
      ...context,
      hint: `create it, or name an existing database in the path of ${variable}`,
    });
  }
  if (code && UNREACHABLE.has(code)) {
    return new SqltallyError(`cannot reach ${connection.host}:${connection.port} (${code}) from ${variable}=${origin}`, {
      ...context,
      hint: `start the server or correct the host and port in ${variable}`,
    });
  }
  return new SqltallyError(`could not connect to ${origin}`, { ...context, hint: `check ${variable}` });
}

/** Driver failures that may mean "not a database there" rather than an answer from one (which carries its own code). */
function worthDiagnosing(cause: unknown): boolean {
  const code = errorCode(cause);
  if (code === undefined) return true;
  if (ACCESS_DENIED.has(code) || NO_DATABASE.has(code)) return false;
  return UNREACHABLE.has(code) || code.startsWith('PROTOCOL_') || code.startsWith('HANDSHAKE_');
}

/**
 * The connect failure in the words of what is really at the address: nothing listening, no answer in N s, an answer
 * that is not this protocol. Each names backend, phase connect, the variable and the redacted URL. When the address
 * does speak the protocol, the driver's own failure is explained as before.
 */
export async function diagnoseConnectFailure(
  cause: unknown,
  protocol: WireProtocol,
  id: string,
  variable: string,
  origin: string,
  connection: NetworkConnection,
  timeoutMs = DEFAULT_DIAGNOSIS_TIMEOUT_MS,
): Promise<SqltallyError> {
  if (!worthDiagnosing(cause)) return explainConnectFailure(cause, id, variable, origin, connection);
  const d = await diagnoseListener(connection.host, connection.port, protocol, timeoutMs);
  const at = `${connection.host}:${connection.port}`;
  const from = `from ${variable}=${origin}`;
  const context = { backend: id, phase: 'connect' as const, provider: 'external', cause };
  const notIt = `point ${variable} at a ${PROTOCOLS[protocol].displayName} server: check the host and port`;
  const seconds = `${timeoutMs / 1000} s`;
  switch (d.kind) {
    case 'refused':
      return new SqltallyError(`nothing listens on ${at} (ECONNREFUSED), ${from}`, {
        ...context,
        hint: `start the server or correct the host and port in ${variable}`,
      });
    case 'unresolved':
      return new SqltallyError(`host ${connection.host} not found (${d.code}), ${from}`, { ...context, hint: `correct the host in ${variable}` });
    case 'unreachable':
      return new SqltallyError(`cannot reach ${at} (${d.code === 'ETIMEDOUT' ? `no answer to the TCP connect in ${seconds}` : d.code}), ${from}`, {
        ...context,
        hint: `check the host, port and network path in ${variable}`,
      });
    case 'silent':
      return new SqltallyError(
        `${at} accepted the connection but sent no answer in ${seconds}: not a ${PROTOCOLS[protocol].displayName} server (${PROTOCOLS[protocol].greeting.silentWords}), or a hung one; ${from}`,
        { ...context, hint: notIt },
      );
    case 'closed':
      return new SqltallyError(
        `${at} accepted the connection and closed it without ${PROTOCOLS[protocol].greeting.closedWithout}: not a ${PROTOCOLS[protocol].displayName} server, or one that refuses this client; ${from}`,
        {
          ...context,
          hint: notIt,
        },
      );
    case 'foreign':
      return new SqltallyError(`${at} answered, but not as a ${PROTOCOLS[protocol].displayName} server (it sent "${d.answer}"); ${from}`, {
        ...context,
        hint: notIt,
      });
    case 'speaks':
      return explainConnectFailure(cause, id, variable, origin, connection);
  }
}

/** Connects to a server someone else runs: nothing to start or stop, but the same proof that it answers. */
export async function startExternal(
  module: BackendModule,
  connection: NetworkConnection,
  options: { id: string; variable: string; origin: string; variant: string | undefined },
): Promise<StartedBackend> {
  const { identify } = module;
  if (!identify) throw new SqltallyError(`${module.name} takes no external URL`, { backend: options.id, phase: 'config', provider: 'external' });
  const t0 = process.hrtime.bigint();
  let identity;
  try {
    identity = await identify(connection);
  } catch (cause) {
    const protocol = CAPABILITIES[module.name].wireProtocol;
    throw protocol
      ? await diagnoseConnectFailure(cause, protocol, options.id, options.variable, options.origin, connection)
      : explainConnectFailure(cause, options.id, options.variable, options.origin, connection);
  }
  const readyNs = process.hrtime.bigint() - t0;
  const label = module.variantLabel(identity.serverVersion);
  if (options.variant !== undefined && label !== options.variant && !label.startsWith(`${options.variant}.`)) {
    throw new SqltallyError(`${options.variable} points at version ${identity.serverVersion}, not ${options.variant}`, {
      backend: options.id,
      phase: 'connect',
      provider: 'external',
      hint: `point ${options.variable} at a ${module.name} ${options.variant} server, or use the plain id ${module.name}`,
    });
  }
  return startedBackend(describeBackend(module, identity, 'external', options.origin, readyNs, false), connection, async () => undefined);
}
