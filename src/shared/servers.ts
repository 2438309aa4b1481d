import { z } from 'zod';

/** The backends sqltally knows. A new one must be added to every table keyed by this type. */
export const BACKEND_NAMES = ['sqlite', 'mariadb', 'mysql', 'postgres'] as const;
export const BackendNameSchema = z.enum(BACKEND_NAMES);
export type BackendName = z.infer<typeof BackendNameSchema>;

/** The server's own word on what it is: read from the server, never taken from config. */
export const FlavourSchema = z.enum(['sqlite', 'mariadb', 'mysql', 'postgres']);
export type Flavour = z.infer<typeof FlavourSchema>;

/**
 * The wire protocols sqltally proxies and parses. A new one is a compile error until `PROTOCOLS`
 * (src/wire/protocols.ts) and every other table keyed by it has an entry.
 */
export const WIRE_PROTOCOLS = ['mysql', 'postgres'] as const;
export const WireProtocolSchema = z.enum(WIRE_PROTOCOLS);
export type WireProtocol = z.infer<typeof WireProtocolSchema>;

/** Host/port/user connection details for a network server. The password never reaches a report. */
export interface NetworkConnection {
  kind: 'network';
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

export interface SqliteConnection {
  kind: 'file';
  filename: string;
}

export type ConnectionInfo = NetworkConnection | SqliteConnection;

/**
 * The server-side numbers every backend can be compared on. A probe maps its own counters onto these, and
 * leaves a field null when the server has no honest way to tell it (SQLite has no statement counter).
 */
export const ServerSummarySchema = z.object({
  /** Client statements the server counted (MySQL `Questions`; PostgreSQL `pg_stat_statements` calls). */
  statements: z.number().int().nullable(),
  inserts: z.number().int().nullable(),
  prepares: z.number().int().nullable(),
  executes: z.number().int().nullable(),
  /** Bulk commands (MariaDB `COM_STMT_BULK_EXECUTE`); null where the server has none. */
  bulkExecutes: z.number().int().nullable(),
  commits: z.number().int().nullable(),
  rowsInserted: z.number().int().nullable(),
});
export type ServerSummary = z.infer<typeof ServerSummarySchema>;
