import type { WireProtocol } from '../backends/types';
import { MYSQL_WIRE } from './mysql';
import { POSTGRES_WIRE } from './postgres';
import type { SettleRequest } from './settle';
import type { WireSession } from './tally';

/** The wire proxy's side of one protocol (the connection facts are `PROTOCOLS` in src/backends/protocols.ts). */
export interface WireProtocolModule {
  /** The incremental parser for one proxied connection. */
  session(tls: 'refuse' | 'passthrough'): WireSession;
  /** The no-op request the proxy settles an idle connection with, and how its answer is framed. */
  readonly settle: SettleRequest;
}

/** The proxy's module of each wire protocol, keyed so that a new protocol cannot be left without one. */
export const WIRE_SESSIONS = {
  mysql: MYSQL_WIRE,
  postgres: POSTGRES_WIRE,
} satisfies Record<WireProtocol, WireProtocolModule>;
