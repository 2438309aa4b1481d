import { z } from 'zod';

/** The drivers sqltally counts. A new one must be added to the registry (registry.ts), which the compiler checks. */
export const DRIVER_NAMES = ['mysql2', 'mariadb', 'pg', 'better-sqlite3', 'postgres-js', 'sqlite3'] as const;
export const DriverNameSchema = z.enum(DRIVER_NAMES);
export type DriverName = z.infer<typeof DriverNameSchema>;
