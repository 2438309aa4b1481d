import { parseBackendId, resolveBackend, variantIds } from '../src/backends/registry';
import type { Resolution } from '../src/backends/types';
import { RESOLVED_ENV } from './harness';
import { useRamTmpdir } from './ram-tmpdir';
import type { IntegrationBackend } from './harness';

/** Marks this run's private directories, so teardown checks ours and not another run's. */
export const RUN_ID_ENV = 'SQLTALLY_RUN_ID';

function listFromEnv(name: string): string[] {
  return (process.env[name] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * Which ids run. By default each backend's plain id only (its default variant), so a suite does not run once per
 * installed version; `SQLTALLY_BACKENDS=all` runs every variant, and naming a variant id runs that one.
 */
function matches(id: string, wanted: string[]): boolean {
  if (wanted.includes('all')) return true;
  if (wanted.length === 0) return !id.includes('@');
  return wanted.includes(id);
}

function toIntegration(id: string, r: Resolution): IntegrationBackend {
  return r.available
    ? { id, backend: r.backend, available: true, provider: r.provider, origin: r.origin }
    : { id, backend: r.backend, available: false, reason: r.reason };
}

/**
 * Resolves every backend once for the whole run (asynchronously, which test files cannot do at collection time)
 * and fails the run if a backend named in SQLTALLY_REQUIRE is not available.
 */
export default async function globalSetup(): Promise<void> {
  process.env[RUN_ID_ENV] ||= `j${Date.now().toString(36)}${process.pid.toString(36)}`;
  // Before anything looks at TMPDIR: Jest starts its workers after global setup, so they and every child inherit it.
  const tmpdir = useRamTmpdir(process.env);
  const wanted = listFromEnv('SQLTALLY_BACKENDS');
  const required = listFromEnv('SQLTALLY_REQUIRE');
  // Validates names early: a typo in SQLTALLY_BACKENDS or SQLTALLY_REQUIRE fails here with the known names.
  for (const id of [...wanted, ...required]) if (id !== 'all') parseBackendId(id);
  const known = await variantIds(process.env);
  // A required or explicitly wanted variant that is not in the default list is resolved too.
  const extra = wanted.filter((w) => w !== 'all' && !known.includes(w) && w.includes('@'));
  const ids = [...known.filter((id) => matches(id, wanted)), ...new Set(extra)];
  const resolved = await Promise.all(ids.map(async (id) => toIntegration(id, await resolveBackend(id, process.env))));
  process.env[RESOLVED_ENV] = JSON.stringify(resolved);

  const problems: string[] = [];
  for (const need of required) {
    // A required variant that the plain id already covers (postgres@15 when postgres is 15) is checked, not run twice.
    const hit = resolved.find((b) => b.id === need) ?? (wanted.length === 0 ? toIntegration(need, await resolveBackend(need, process.env)) : undefined);
    if (!hit) problems.push(`${need}: required but excluded by SQLTALLY_BACKENDS=${wanted.join(',')}`);
    else if (!hit.available) problems.push(`${need}: ${hit.reason}`);
  }
  const lines = resolved.map((b) => `  ${b.id.padEnd(16)} ${b.available ? `${b.provider} (${b.origin})` : `skipped: ${b.reason}`}`);
  process.stdout.write(`\nsqltally backends for this run (${tmpdir}):\n${lines.join('\n')}\n`);
  if (problems.length > 0) {
    throw new Error(`SQLTALLY_REQUIRE names backends that are not available here:\n  ${problems.join('\n  ')}`);
  }
}
