import { z } from 'zod';
import { listBackends, parseBackendId, resolveBackend } from '../backends/registry';
import { ProviderKindSchema } from '../backends/types';
import type { Resolution } from '../backends/types';
import { describeSweep, sweepStalePrivateDirs } from '../backends/stale';
import type { Command } from './main';
import { argsCheckedOnly, parseFlags, usageExit } from './usage';

const USAGE = `usage: sqltally backends [--check] [--json] [id ...]

Lists every backend and variant with the provider it would use here, or why it is skipped.
  id          only these (sqlite, mariadb, postgres@15, ...); default: all known
  --check     also start each available one, read its version, time spawn-to-ready, stop it
  --json      machine-readable output
Private data directories left by a sqltally process that died (SIGKILL) are cleaned first and listed.
Exit code: 0 ok; 1 a check failed, a backend named in SQLTALLY_REQUIRE is unavailable, or a SQLTALLY_*_URL is set
but unusable; 2 bad usage.`;

const CheckSchema = z.object({
  ok: z.boolean(),
  /** The id the started server calls itself (`mariadb@10.11`). */
  startedId: z.string().optional(),
  flavour: z.string().optional(),
  serverVersion: z.string().optional(),
  /** Spawn (or connect) to first successful query, as measured by the provider. */
  readyMs: z.number().nonnegative().optional(),
  /** Whole start call, including data directory initialisation. */
  startMs: z.number().nonnegative().optional(),
  stopMs: z.number().nonnegative().optional(),
  error: z.string().optional(),
});

/** The `--json` output; a schema so scripts reading it can validate what they get. */
export const BackendsReportSchema = z.object({
  schemaVersion: z.literal(1),
  backends: z.array(
    z.object({
      id: z.string(),
      backend: z.string(),
      available: z.boolean(),
      provider: ProviderKindSchema.optional(),
      origin: z.string().optional(),
      expectedVersion: z.string().optional(),
      reason: z.string().optional(),
      /** The variable holding a URL that is set but cannot be used. */
      misconfigured: z.string().optional(),
      tried: z.array(z.object({ provider: ProviderKindSchema, reason: z.string() })),
      check: CheckSchema.optional(),
    }),
  ),
  /** Backends named in SQLTALLY_REQUIRE that are not available. */
  missingRequired: z.array(z.string()),
  /** Private data directories left by a run that died (owner gone), removed before listing. */
  cleaned: z.array(
    z.object({
      dir: z.string(),
      backend: z.string(),
      ownerPid: z.number().int(),
      bytes: z.number().int().nonnegative(),
      stoppedPids: z.array(z.number().int()),
    }),
  ),
  /** Such directories that could not be removed, and why. */
  stuck: z.array(z.object({ dir: z.string(), reason: z.string() })),
  /** Owner records not acted on (another user's, a link, naming a process that is not a server of ours), and why. */
  refused: z.array(z.object({ file: z.string(), reason: z.string() })).default([]),
});
export type BackendsReport = z.infer<typeof BackendsReportSchema>;
type BackendEntry = BackendsReport['backends'][number];
type Check = z.infer<typeof CheckSchema>;

const ms = (ns: bigint): number => Number(ns) / 1e6;
const shownMs = (value: number | undefined): string => (value === undefined ? '-' : value.toFixed(1));

/** Starts, identifies and stops one backend; a failure becomes the check's error, never an exception. */
async function check(resolution: Extract<Resolution, { available: true }>): Promise<Check> {
  const t0 = process.hrtime.bigint();
  let started;
  try {
    started = await resolution.start();
  } catch (err) {
    return { ok: false, startMs: ms(process.hrtime.bigint() - t0), error: err instanceof Error ? err.message : String(err) };
  }
  const startMs = ms(process.hrtime.bigint() - t0);
  const t1 = process.hrtime.bigint();
  try {
    await started.stop();
  } catch (err) {
    return { ok: false, startMs, error: `stop failed: ${err instanceof Error ? err.message : String(err)}` };
  }
  const d = started.description;
  return {
    ok: true,
    startedId: d.id,
    flavour: d.flavour,
    serverVersion: d.serverVersion,
    readyMs: d.readyMs,
    startMs,
    stopMs: ms(process.hrtime.bigint() - t1),
  };
}

function entry(id: string, r: Resolution): BackendEntry {
  return r.available
    ? {
        id,
        backend: r.backend,
        available: true,
        provider: r.provider,
        origin: r.origin,
        ...(r.expectedVersion ? { expectedVersion: r.expectedVersion } : {}),
        tried: r.tried,
      }
    : { id, backend: r.backend, available: false, reason: r.reason, ...(r.misconfigured ? { misconfigured: r.misconfigured.variable } : {}), tried: r.tried };
}

function renderText(report: BackendsReport, checked: boolean): string {
  const lines: string[] = [];
  const width = Math.max(8, ...report.backends.map((b) => b.id.length)) + 2;
  for (const b of report.backends) {
    if (!b.available) {
      lines.push(`${b.id.padEnd(width)}skipped: ${b.reason}`);
      continue;
    }
    const head = `${b.id.padEnd(width)}${b.provider} ${b.origin}${b.expectedVersion ? ` (${b.expectedVersion})` : ''}`;
    if (!checked || !b.check) lines.push(head);
    else if (b.check.ok) {
      lines.push(
        `${head}\n${''.padEnd(width)}ok: ${b.check.startedId} ${b.check.serverVersion}, ready in ${shownMs(b.check.readyMs)} ms (start ${shownMs(b.check.startMs)} ms, stop ${shownMs(b.check.stopMs)} ms)`,
      );
    } else lines.push(`${head}\n${''.padEnd(width)}FAILED: ${b.check.error}`);
  }
  for (const id of report.missingRequired) lines.push(`required by SQLTALLY_REQUIRE but unavailable: ${id}`);
  for (const b of report.backends) if (b.misconfigured) lines.push(`${b.misconfigured} is set but unusable: fix it or unset it (a run fails on it)`);
  lines.push(...describeSweep({ removed: report.cleaned, stuck: report.stuck, refused: report.refused }));
  return lines.join('\n');
}

export const command: Command = {
  summary: 'list backends and the provider each would use; --check starts and times each',
  async run(argv: string[]): Promise<number> {
    let parsed;
    try {
      parsed = parseFlags(
        argv,
        { check: { type: 'boolean', default: false }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
        true,
      );
    } catch (err) {
      return usageExit('backends', err);
    }
    if (parsed.values.help) {
      console.log(USAGE);
      return 0;
    }
    const env = process.env;
    // Unknown ids fail here, before anything is started.
    for (const id of parsed.positionals) parseBackendId(id);
    if (argsCheckedOnly('backends')) return 0;
    // What a killed run left behind goes first, so the listing (and --check) starts from a clean slate.
    const sweep = await sweepStalePrivateDirs(env);
    const resolutions: [string, Resolution][] =
      parsed.positionals.length > 0
        ? await Promise.all(parsed.positionals.map(async (id): Promise<[string, Resolution]> => [id, await resolveBackend(id, env)]))
        : (await listBackends(env)).map((r): [string, Resolution] => [r.id ?? r.backend, r]);

    const backends: BackendEntry[] = [];
    // One at a time: the machine's cores are shared, and concurrent starts would distort the ready times.
    for (const [id, r] of resolutions) {
      const e = entry(id, r);
      if (parsed.values.check && r.available) e.check = await check(r);
      backends.push(e);
    }
    const required = (env['SQLTALLY_REQUIRE'] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const missingRequired: string[] = [];
    for (const need of required) {
      const hit = backends.find((b) => b.id === need) ?? entry(need, await resolveBackend(need, env));
      if (!hit.available) missingRequired.push(need);
    }
    const report = BackendsReportSchema.parse({
      schemaVersion: 1,
      backends,
      missingRequired,
      cleaned: sweep.removed,
      stuck: sweep.stuck,
      refused: sweep.refused,
    });
    console.log(parsed.values.json ? JSON.stringify(report, null, 2) : renderText(report, parsed.values.check));
    const failed = backends.some((b) => (b.check && !b.check.ok) || b.misconfigured) || missingRequired.length > 0;
    return failed ? 1 : 0;
  },
};
