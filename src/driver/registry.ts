import type { BackendName } from '../shared/servers';
import { BETTER_SQLITE3_DRIVER } from './better-sqlite3';
import { MARIADB_DRIVER } from './mariadb';
import type { DriverModule, SomeDriverModule } from './module';
import { MYSQL2_DRIVER } from './mysql2';
import { DRIVER_NAMES, type DriverName } from '../shared/driver-names';
import { PG_DRIVER } from './pg';
import { POSTGRES_JS_DRIVER } from './postgres-js';
import { SQLITE3_DRIVER } from './sqlite3';

/**
 * Every driver, by name. The mapped type makes a name added to DRIVER_NAMES but not here (or a module whose `name`
 * differs from its key) a compile error; each module's handle type flows from here to every caller.
 */
export const DRIVERS = {
  mysql2: MYSQL2_DRIVER,
  mariadb: MARIADB_DRIVER,
  pg: PG_DRIVER,
  'better-sqlite3': BETTER_SQLITE3_DRIVER,
  'postgres-js': POSTGRES_JS_DRIVER,
  sqlite3: SQLITE3_DRIVER,
} satisfies { [D in DriverName]: SomeDriverModule<D> };

type Drivers = typeof DRIVERS;
type HandleOf<M> = M extends DriverModule<DriverName, infer H> ? H : never;

/** The raw connection object a driver module opens (a pg `Client`, a better-sqlite3 `Database`, ...). */
export type DriverHandle<D extends DriverName> = HandleOf<Drivers[D]>;

// The same registry seen through the mapped type, so that indexing it with a generic name keeps the name.
const BY_NAME: { [D in DriverName]: SomeDriverModule<D> } = DRIVERS;

/** A driver module with its handle type, for code that is generic over the driver. */
export function driverModule<D extends DriverName>(name: D): DriverModule<D, DriverHandle<D>> {
  return BY_NAME[name];
}

/** Drivers that talk to `backend`, in registry order: the first is the backend's default. */
export function driversFor(backend: BackendName): DriverName[] {
  return DRIVER_NAMES.filter((name) => (DRIVERS[name].backends as readonly BackendName[]).includes(backend));
}

/** The module whose wrapper counts `value`, or undefined: how an object the user created is recognised. */
export function driverOf(value: unknown): SomeDriverModule<DriverName> | undefined {
  return DRIVER_NAMES.map((name): SomeDriverModule<DriverName> => BY_NAME[name]).find((module) => module.recognises(value));
}
