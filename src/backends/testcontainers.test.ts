import { MARIADB } from './mariadb';
import { MYSQL } from './mysql';
import { POSTGRES } from './postgres';
import { SQLITE } from './sqlite';
import { buildContainer, containerPlanFor, imageFor } from './testcontainers';

describe('container plans (checked without an engine)', () => {
  it('pins the default images', () => {
    expect(imageFor(MYSQL, undefined, {})).toBe('mysql:8.4');
    expect(imageFor(MARIADB, undefined, {})).toBe('mariadb:11.4');
    expect(imageFor(POSTGRES, undefined, {})).toBe('postgres:17');
    expect(imageFor(SQLITE, undefined, {})).toBeUndefined();
  });

  it('lets SQLTALLY_<BACKEND>_IMAGE override the image of the plain id', () => {
    expect(imageFor(POSTGRES, undefined, { SQLTALLY_POSTGRES_IMAGE: 'registry.local/pg:17.2' })).toBe('registry.local/pg:17.2');
    expect(imageFor(MARIADB, undefined, { SQLTALLY_MARIADB_IMAGE: 'mariadb:10.11' })).toBe('mariadb:10.11');
  });

  it('turns a variant into an image tag, unless a variant image is named', () => {
    expect(imageFor(POSTGRES, '16', {})).toBe('postgres:16');
    expect(imageFor(MARIADB, '10.11', {})).toBe('mariadb:10.11');
    expect(imageFor(MARIADB, '10.11', { SQLTALLY_MARIADB_10_11_IMAGE: 'quay.io/mariadb:10.11.9' })).toBe('quay.io/mariadb:10.11.9');
  });

  it('loads pg_stat_statements on PostgreSQL', () => {
    const plan = containerPlanFor(POSTGRES, undefined, {});
    expect(plan).toMatchObject({ image: 'postgres:17', reuse: false, containerPort: 5432 });
    expect(plan?.command.slice(0, 2)).toEqual(['-c', 'shared_preload_libraries=pg_stat_statements']);
  });

  it('turns durability off as on a private server: a container is thrown away too, and fsync per commit slows every window', () => {
    expect(containerPlanFor(POSTGRES, undefined, {})?.command).toEqual(
      expect.arrayContaining(['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
    );
    for (const module of [MARIADB, MYSQL]) {
      expect(containerPlanFor(module, undefined, {})?.command).toEqual(expect.arrayContaining(['--innodb-flush-log-at-trx-commit=0', '--skip-log-bin']));
    }
  });

  it('turns performance_schema on for MariaDB and MySQL, with room for a 22 MB statement', () => {
    for (const module of [MARIADB, MYSQL]) {
      const plan = containerPlanFor(module, undefined, {});
      expect(plan?.command).toContain('--performance-schema=ON');
      expect(plan?.command).toContain('--max-allowed-packet=64M');
      expect(plan).toMatchObject({ reuse: false, containerPort: 3306, user: 'root', database: 'sqltally' });
    }
  });

  it('gives every container a fresh password of its own, never a known one', () => {
    for (const module of [MARIADB, MYSQL, POSTGRES]) {
      const [a, b] = [containerPlanFor(module, undefined, {}), containerPlanFor(module, undefined, {})];
      expect(a?.password).not.toBe(b?.password);
      expect(a?.password.length).toBeGreaterThanOrEqual(20);
      expect(a?.password).not.toBe('sqltally');
    }
  });

  it('has no plan for the embedded SQLite', () => {
    expect(containerPlanFor(SQLITE, undefined, {})).toBeUndefined();
  });

  // Reads Testcontainers' own (protected) fields: the only way to see, without an engine, that the plan reached
  // the container it will create.
  it.each([
    ['postgres', POSTGRES],
    ['mariadb', MARIADB],
    ['mysql', MYSQL],
  ] as const)('applies the %s plan to the Testcontainers container, reuse off', async (_name, module) => {
    const plan = containerPlanFor(module, undefined, {});
    if (!plan) throw new Error('no plan');
    const container = (await buildContainer(module, plan)) as unknown as { createOpts: { Image: string; Cmd: string[] }; reuse: boolean };
    expect(container.createOpts.Image).toBe(plan.image);
    expect(container.createOpts.Cmd).toEqual(plan.command);
    expect(container.reuse).toBe(false);
  });

  it.each([
    ['postgres', POSTGRES, '@testcontainers/postgresql'],
    ['mariadb', MARIADB, '@testcontainers/mariadb'],
  ] as const)('names the Testcontainers package of %s when it is not installed', async (_name, module, packageName) => {
    const missing = Object.assign(new Error('Cannot find module'), { code: 'MODULE_NOT_FOUND' });
    const builder = { packageName: module.containerBuilder.packageName, build: () => Promise.reject(missing) };
    const plan = containerPlanFor(module, undefined, {});
    if (!plan) throw new Error('no plan');
    await expect(buildContainer({ ...module, containerBuilder: builder }, plan)).rejects.toMatchObject({
      hint: `npm install testcontainers ${packageName} (optional peer dependencies of sqltally)`,
    });
  });
});
