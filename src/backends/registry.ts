import type { BackendModule, InstallSearch, LocalInstall } from './backend';
import { detectContainerEngine } from './engine';
import { SqltallyError } from '../shared/errors';
import { startExternal } from './external';
import { MARIADB } from './mariadb';
import { MYSQL } from './mysql';
import { POSTGRES } from './postgres';
import { SQLITE } from './sqlite';
import { containerPlanFor, startContainer } from './testcontainers';
import { BACKEND_NAMES, PROVIDER_KINDS } from './types';
import type { Available, BackendName, ProviderKind, Resolution, StartedBackend, Unavailable } from './types';
import { parseExternalUrl, redactUrl } from './url';

/** Every backend, by name. `satisfies` makes a backend added to BACKEND_NAMES but not here a compile error. */
export const BACKENDS = {
  sqlite: SQLITE,
  mariadb: MARIADB,
  mysql: MYSQL,
  postgres: POSTGRES,
} satisfies Record<BackendName, BackendModule>;

/** Values accepted by `SQLTALLY_PROVIDER` and `SQLTALLY_<BACKEND>_PROVIDER`. */
const FORCEABLE: readonly ProviderKind[] = PROVIDER_KINDS;

/** `mariadb@10.11` -> { name: 'mariadb', variant: '10.11' }; a plain name means the default variant. */
export interface BackendId {
  id: string;
  name: BackendName;
  variant: string | undefined;
}

export function parseBackendId(id: string): BackendId {
  const trimmed = id.trim();
  const [name = '', variant, ...extra] = trimmed.split('@');
  const known = (BACKEND_NAMES as readonly string[]).includes(name);
  if (!known || extra.length > 0 || variant === '' || (variant !== undefined && !/^[0-9A-Za-z.+_-]+$/.test(variant))) {
    throw new SqltallyError(`unknown backend "${id}"`, {
      backend: id,
      phase: 'config',
      hint: `use one of ${BACKEND_NAMES.join(', ')}, optionally with a version: mariadb@10.11, postgres@15`,
    });
  }
  return { id: trimmed, name: name as BackendName, variant };
}

/** `postgres@15` + `URL` -> `SQLTALLY_POSTGRES_15_URL`. */
export function envKey(backendId: BackendId, suffix: string): string {
  const idPart = [backendId.name, backendId.variant].filter(Boolean).join('_');
  return `SQLTALLY_${idPart.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_${suffix}`;
}

/**
 * The provider a person forced, if any: per backend first, then the global one. A backend that runs only embedded
 * (SQLite) ignores a global `SQLTALLY_PROVIDER` (a per-backend one still applies).
 */
export function forcedProvider(module: BackendModule, env: NodeJS.ProcessEnv): { provider: ProviderKind; variable: string } | undefined {
  const perBackend = `SQLTALLY_${module.name.toUpperCase()}_PROVIDER`;
  const embeddedOnly = module.providers.every((p) => p === 'embedded');
  const candidates: [string, string | undefined][] = [
    [perBackend, env[perBackend]],
    ['SQLTALLY_PROVIDER', embeddedOnly ? undefined : env['SQLTALLY_PROVIDER']],
  ];
  for (const [variable, raw] of candidates) {
    if (!raw) continue;
    const value = raw.trim().toLowerCase();
    // For the embedded engine, "local" is what a person means.
    const provider = embeddedOnly && value === 'local' ? 'embedded' : value;
    if (!(FORCEABLE as readonly string[]).includes(provider)) {
      throw new SqltallyError(`${variable}="${raw}" is not a provider`, {
        backend: module.name,
        phase: 'config',
        hint: `use one of ${FORCEABLE.filter((p) => p !== 'embedded').join(', ')}`,
      });
    }
    return { provider: provider as ProviderKind, variable };
  }
  return undefined;
}

const installCache = new Map<string, Promise<InstallSearch>>();

/** Local installs of a backend, from every finder in order; cached per PATH so listing stays cheap. */
export function localInstalls(module: BackendModule, env: NodeJS.ProcessEnv): Promise<InstallSearch> {
  // Everything a finder may read: PATH, TMPDIR and the SQLTALLY_* overrides (bindirs, root filesystem cache).
  const relevant = Object.entries(env).filter(([k]) => k === 'PATH' || k === 'TMPDIR' || k.startsWith('SQLTALLY_'));
  const key = [module.name, ...relevant.sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`)].join('\0');
  let search = installCache.get(key);
  if (!search) {
    search = Promise.all(module.installFinders.map((find) => find(env))).then((results) => ({
      installs: results.flatMap((r) => r.installs),
      missing: results.flatMap((r) => r.missing),
    }));
    installCache.set(key, search);
  }
  return search;
}

function matchesVariant(install: LocalInstall, variant: string | undefined): boolean {
  return variant === undefined || install.label === variant || install.version.startsWith(`${variant}.`) || install.version === variant;
}

type Attempt = { ok: true; resolution: Available } | { ok: false; reason: string; final?: boolean; misconfigured?: { variable: string } };

async function tryExternal(module: BackendModule, id: BackendId, env: NodeJS.ProcessEnv): Promise<Attempt> {
  const variable = envKey(id, 'URL');
  const raw = env[variable];
  if (!raw) return { ok: false, reason: `${variable} not set` };
  const origin = redactUrl(raw);
  let connection;
  try {
    connection = parseExternalUrl(module, raw, variable, id.id);
  } catch (err) {
    // A URL a person set but we cannot use must not silently fall through to another server.
    return { ok: false, reason: err instanceof Error ? err.message : String(err), final: true, misconfigured: { variable } };
  }
  return {
    ok: true,
    resolution: {
      available: true,
      backend: module.name,
      id: id.id,
      provider: 'external',
      origin,
      tried: [],
      start: () => startExternal(module, connection, { id: id.id, variable, origin, variant: id.variant }),
    },
  };
}

async function tryTestcontainers(module: BackendModule, id: BackendId, env: NodeJS.ProcessEnv): Promise<Attempt> {
  const plan = containerPlanFor(module, id.variant, env);
  if (!plan) return { ok: false, reason: `${module.name} has no container image` };
  const engine = await detectContainerEngine(env);
  if (!engine.reachable) return { ok: false, reason: engine.reason };
  return {
    ok: true,
    resolution: {
      available: true,
      backend: module.name,
      id: id.id,
      provider: 'testcontainers',
      origin: plan.image,
      tried: [],
      start: () => startContainer(module, plan, id.id),
    },
  };
}

async function tryLocal(module: BackendModule, id: BackendId, env: NodeJS.ProcessEnv): Promise<Attempt> {
  const { installs, missing } = await localInstalls(module, env);
  const install = installs.find((i) => matchesVariant(i, id.variant));
  if (!install) {
    if (installs.length > 0) {
      return { ok: false, reason: `no ${module.name} ${id.variant} binaries (found ${installs.map((i) => i.version).join(', ')})` };
    }
    return { ok: false, reason: missing.join('; ') || `no ${module.name} binaries found` };
  }
  return {
    ok: true,
    resolution: {
      available: true,
      backend: module.name,
      id: id.id,
      provider: install.provider,
      origin: install.origin,
      expectedVersion: install.version,
      tried: [],
      start: () => install.start({ env, id: id.id }),
    },
  };
}

const ATTEMPTS: Record<ProviderKind, (module: BackendModule, id: BackendId, env: NodeJS.ProcessEnv) => Promise<Attempt>> = {
  external: tryExternal,
  testcontainers: tryTestcontainers,
  local: tryLocal,
  embedded: tryLocal,
};

function unavailable(module: BackendModule, id: BackendId, tried: Unavailable['tried'], reason: string, misconfigured?: { variable: string }): Unavailable {
  return { available: false, backend: module.name, id: id.id, reason, tried, ...(misconfigured ? { misconfigured } : {}) };
}

/**
 * The providers to try, in order. A URL set for this id wins over the order and over a global `SQLTALLY_PROVIDER`; a
 * per-backend provider other than `external` beside the URL is a usage error naming both, never a silent choice.
 */
function providerOrder(module: BackendModule, id: BackendId, forced: ReturnType<typeof forcedProvider>, env: NodeJS.ProcessEnv): readonly ProviderKind[] {
  const urlVariable = envKey(id, 'URL');
  const url = module.providers.includes('external') ? env[urlVariable] : undefined;
  if (!url) return forced ? [forced.provider] : module.providers;
  if (!forced || forced.provider === 'external' || forced.variable === 'SQLTALLY_PROVIDER') return ['external'];
  throw new SqltallyError(
    `${forced.variable}=${forced.provider} and ${urlVariable}=${redactUrl(url)} are both set for ${id.id}: one asks for ${forced.provider}, the other for the server at the URL`,
    {
      backend: id.id,
      phase: 'config',
      hint: `unset ${forced.variable} to use the URL, or unset ${urlVariable} to use ${forced.provider}`,
    },
  );
}

/**
 * Decides how a backend id would be obtained here, without starting anything: the first provider that can
 * serve it (external URL, Testcontainers, local binaries), or why none can. Throws only for bad config
 * (unknown backend name, a provider name that does not exist, a forced provider contradicting a set URL).
 */
export async function resolveBackend(id: string, env: NodeJS.ProcessEnv = process.env): Promise<Resolution> {
  const parsed = parseBackendId(id);
  const module: BackendModule = BACKENDS[parsed.name];
  const forced = forcedProvider(module, env);
  if (forced && !module.providers.includes(forced.provider)) {
    return unavailable(module, parsed, [], `${forced.variable}=${forced.provider}, but ${module.name} can only use ${module.providers.join(', ')}`);
  }
  const order = providerOrder(module, parsed, forced, env);
  const tried: Unavailable['tried'] = [];
  for (const provider of order) {
    const attempt = await ATTEMPTS[provider](module, parsed, env);
    if (attempt.ok) return { ...attempt.resolution, tried };
    tried.push({ provider, reason: attempt.reason });
    if (attempt.final) return unavailable(module, parsed, tried, attempt.reason, attempt.misconfigured);
  }
  // "URL not set" is implied by the hint, which names the variable; the rest says what is missing here.
  const told = tried.filter((t) => t.provider !== 'external' || forced).map((t) => t.reason);
  const prefix = forced ? `${forced.variable}=${forced.provider}: ` : '';
  // Forced to external, the only fix is the URL; the install hint would point the wrong way.
  const hint = forced?.provider === 'external' ? `set ${envKey(parsed, 'URL')}` : module.unavailableHint;
  const said = told.join(' and ');
  // A reason may already give part of the advice (the root filesystem's names its provisioning command): not twice.
  const alternatives = hint.split(' or ');
  const fresh = alternatives.filter((a) => !said.includes(a));
  const advice = fresh.length === alternatives.length ? `: ${hint}` : fresh.length > 0 ? `; or ${fresh.join(' or ')}` : '';
  return unavailable(module, parsed, tried, `${prefix}${said}${advice}`);
}

/** Starts a backend by id (`sqlite`, `mariadb@10.11`), or throws a SqltallyError saying why it cannot here. */
export async function startBackend(id: string, env: NodeJS.ProcessEnv = process.env): Promise<StartedBackend> {
  const resolution = await resolveBackend(id, env);
  if (!resolution.available) {
    throw new SqltallyError(`backend ${id} is not available: ${resolution.reason}`, {
      backend: id,
      phase: 'provision',
      ...(resolution.tried.length > 0 ? { provider: resolution.tried.map((t) => t.provider).join('/') } : {}),
    });
  }
  return resolution.start();
}

/**
 * Every id worth listing: each backend's plain name, plus each further local install as `<name>@<label>`
 * (a second PostgreSQL, a chroot MariaDB 11) when it is not the one the plain name would start.
 */
export async function variantIds(env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const ids: string[] = [];
  for (const name of BACKEND_NAMES) {
    const module: BackendModule = BACKENDS[name];
    ids.push(name);
    const plain = await resolveBackend(name, env);
    const { installs } = await localInstalls(module, env);
    const seen = new Set<string>();
    for (const install of installs) {
      const id = `${name}@${install.label}`;
      if (seen.has(id)) continue;
      seen.add(id);
      const same = plain.available && plain.provider === install.provider && plain.origin === install.origin;
      if (!same) ids.push(id);
    }
  }
  return ids;
}

/** One resolution per known id (see `variantIds`), in registry order. */
export async function listBackends(env: NodeJS.ProcessEnv = process.env): Promise<Resolution[]> {
  const ids = await variantIds(env);
  return Promise.all(ids.map((id) => resolveBackend(id, env)));
}
