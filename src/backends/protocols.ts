import type { SqlDialect } from '../sql/tokenizer';
import { SqltallyError } from '../shared/errors';
import type { SqlClient } from './sql-client';
import type { BackendDescription, WireProtocol } from './types';

/**
 * How to tell, without logging in, whether what listens on an address speaks the protocol: what to send first,
 * when enough has come back, whether it is this protocol's answer, and the words for an error that says it is not.
 */
export interface ListenerGreeting {
  /** Sent on connecting; null when the server speaks first. */
  readonly opening: Buffer | null;
  /** Enough bytes have arrived to decide. */
  enough(bytes: Buffer): boolean;
  /** The bytes are this protocol's first answer (a greeting, an error packet, an SSL answer). */
  speaks(bytes: Buffer): boolean;
  /** Why silence means "not this protocol": `one greets at once`. */
  readonly silentWords: string;
  /** What a server of this protocol would have sent before closing: `a MySQL greeting`. */
  readonly closedWithout: string;
  /**
   * Whether the answer offers TLS to the client (a passive capture cannot read a session that takes it up); null
   * when the bytes are not an answer that says (an error packet, something else).
   */
  offersTls(bytes: Buffer): boolean | null;
}

/** Address of a network server as the protocol's own clients take it. */
export interface ProtocolAddress {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

/**
 * What sqltally knows about connecting over one wire protocol (the proxy's parser and settle request are in
 * src/wire/protocols.ts, a later layer). {@link PROTOCOLS} is typed
 * `satisfies Record<WireProtocol, ProtocolModule>`, so a third protocol is a compile error until each is filled,
 * and shared code asks this object instead of branching on the protocol's name.
 */
export interface ProtocolModule {
  readonly name: WireProtocol;
  /** For people: `MySQL/MariaDB`, `PostgreSQL`. */
  readonly displayName: string;
  /** URL scheme its clients are configured with (`mysql://`, `postgres://`). */
  readonly urlScheme: string;
  /** How its servers' SQL is written (identifier quoting for sqltally's own statements). */
  readonly dialect: SqlDialect;
  /**
   * Cancels what server connection `connectionId` is running, through sqltally's own client; true when the server
   * confirmed it. The connection stays open: its client sees the statement fail.
   */
  cancel(client: SqlClient, connectionId: number): Promise<boolean>;
  /** How `diagnoseListener` recognises a server of this protocol. */
  readonly greeting: ListenerGreeting;
  /**
   * Whether the driver's own ping on the same connection settles the server's statement bookkeeping (MySQL files a
   * statement in performance_schema only after answering it). False: the probe flushes through the connection.
   */
  readonly pingSettles: boolean;
  /** Environment variables the protocol's standard command-line clients and libraries read (libpq `PG*`). */
  clientEnv(address: ProtocolAddress): Record<string, string>;
  /** The one of {@link clientEnv} that carries the password: masked whenever an environment is printed. */
  readonly clientPasswordVariable: string;
  /**
   * Every variable its clients read for where and how to connect (libpq's service and password files, TLS settings
   * too): taken out of a child's inherited environment, so that only {@link clientEnv} points it anywhere.
   */
  readonly clientVariables: RegExp;
}

/** MySQL protocol 10 greeting, or an ERR packet (a server refusing this host, or "too many connections"). */
const MYSQL_GREETING = 0x0a;
const MYSQL_ERR = 0xff;
/** The greeting's capability bit saying the server takes an SSLRequest. */
const MYSQL_CLIENT_SSL = 0x800;
/** Longer than any greeting: a first packet this long is something else. */
export const MYSQL_MAX_GREETING = 1 << 16;
/** A MySQL/MariaDB server speaks first: a packet with sequence id 0 holding a v10 handshake or an error. */
export function looksLikeMysqlGreeting(bytes: Buffer): boolean {
  if (bytes.length < 5) return false;
  const length = bytes[0]! | (bytes[1]! << 8) | (bytes[2]! << 16);
  return length > 0 && length < MYSQL_MAX_GREETING && bytes[3] === 0 && (bytes[4] === MYSQL_GREETING || bytes[4] === MYSQL_ERR);
}

/** CLIENT_SSL in a protocol-10 greeting: after the version string, the thread id, 8 bytes of scramble and a filler. */
export function mysqlGreetingOffersTls(bytes: Buffer): boolean | null {
  if (!looksLikeMysqlGreeting(bytes) || bytes[4] !== MYSQL_GREETING) return null;
  const nul = bytes.indexOf(0, 5);
  const capsLow = nul + 1 + 4 + 8 + 1;
  if (nul < 0 || capsLow + 2 > 4 + bytes.readUIntLE(0, 3) || capsLow + 2 > bytes.length) return null;
  return (bytes.readUInt16LE(capsLow) & MYSQL_CLIENT_SSL) !== 0;
}

async function killQuery(client: SqlClient, connectionId: number): Promise<boolean> {
  // KILL QUERY stops the statement and keeps the connection: the client sees the statement fail.
  return client.query(`KILL QUERY ${connectionId}`).then(
    () => true,
    () => false,
  );
}

/** The MySQL client/server protocol, spoken by MySQL and MariaDB. */
export const MYSQL_PROTOCOL = {
  name: 'mysql',
  displayName: 'MySQL/MariaDB',
  urlScheme: 'mysql',
  dialect: 'mysql',
  cancel: killQuery,
  greeting: {
    opening: null,
    enough: (bytes) => bytes.length >= 5,
    speaks: looksLikeMysqlGreeting,
    silentWords: 'one greets at once',
    closedWithout: 'a MySQL greeting',
    offersTls: mysqlGreetingOffersTls,
  },
  pingSettles: true,
  clientPasswordVariable: 'MYSQL_PWD',
  clientVariables: /^(MYSQL|MARIADB)_[A-Z_]+$/,
  clientEnv: (c) => ({ MYSQL_HOST: c.host, MYSQL_TCP_PORT: String(c.port), MYSQL_PWD: c.password, MYSQL_USER: c.user, MYSQL_DATABASE: c.database }),
} as const satisfies ProtocolModule;

/** PostgreSQL's SSLRequest: length 8, code 80877103. A server answers one byte, `S` or `N`, before anything else. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
/** An ErrorResponse longer than this is not a server refusing an SSLRequest. */
const MAX_ERROR_ANSWER = 1 << 16;

/** A PostgreSQL server answers an SSLRequest with `S` (TLS on offer) or `N`, or (older, or refusing) an ErrorResponse. */
export function looksLikePostgresAnswer(bytes: Buffer): boolean {
  const first = bytes[0];
  if (first === 0x53 /* S */ || first === 0x4e /* N */) return bytes.length === 1;
  if (first === 0x45 /* E */) return bytes.length < 5 || bytes.readUInt32BE(1) < MAX_ERROR_ANSWER;
  return false;
}

async function cancelBackend(client: SqlClient, connectionId: number): Promise<boolean> {
  const [row] = await client.query<{ ok: boolean }>('SELECT pg_cancel_backend($1) AS ok', [connectionId]);
  return Boolean(row?.ok);
}

/** The PostgreSQL frontend/backend protocol (version 3). */
export const POSTGRES_PROTOCOL = {
  name: 'postgres',
  displayName: 'PostgreSQL',
  urlScheme: 'postgres',
  dialect: 'postgres',
  cancel: cancelBackend,
  greeting: {
    opening: SSL_REQUEST,
    enough: (bytes) => bytes.length >= 1,
    speaks: looksLikePostgresAnswer,
    silentWords: 'one answers an SSLRequest at once',
    closedWithout: 'answering the PostgreSQL SSLRequest',
    offersTls: (bytes) => (bytes.length === 1 && (bytes[0] === 0x53 || bytes[0] === 0x4e) ? bytes[0] === 0x53 : null),
  },
  pingSettles: false,
  clientPasswordVariable: 'PGPASSWORD',
  clientVariables: /^PG[A-Z_]+$/,
  clientEnv: (c) => ({ PGHOST: c.host, PGPORT: String(c.port), PGUSER: c.user, PGPASSWORD: c.password, PGDATABASE: c.database }),
} as const satisfies ProtocolModule;

/** Every wire protocol sqltally proxies and parses, by name. */
export const PROTOCOLS = {
  mysql: MYSQL_PROTOCOL,
  postgres: POSTGRES_PROTOCOL,
} satisfies Record<WireProtocol, ProtocolModule>;

/** A connection URL with user, password and database percent-encoded, in the scheme clients of the protocol expect. */
export function connectionUrl(protocol: WireProtocol, c: ProtocolAddress): string {
  const auth = `${encodeURIComponent(c.user)}${c.password ? `:${encodeURIComponent(c.password)}` : ''}@`;
  const host = c.host.includes(':') ? `[${c.host}]` : c.host;
  return `${PROTOCOLS[protocol].urlScheme}://${auth}${host}:${c.port}/${encodeURIComponent(c.database)}`;
}

/**
 * The protocol a network backend speaks. A backend reached over the network without one is a broken description:
 * say so rather than guess a protocol.
 */
export function protocolOf(description: Pick<BackendDescription, 'id' | 'capabilities'>): ProtocolModule {
  const protocol = description.capabilities.wireProtocol;
  if (!protocol)
    throw new SqltallyError(`backend ${description.id} is reached over the network but declares no wire protocol`, {
      backend: description.id,
      phase: 'connect',
    });
  return PROTOCOLS[protocol];
}
