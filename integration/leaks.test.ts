// @waits 56: servers started, killed and swept one after another on every backend.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'jest-worker';
import { processAlive } from '../containers/live';
import { sweepStalePrivateDirs } from '../containers/stale';
import { BackendsReportSchema } from '../cli/backends';
import { main } from '../cli/main';
import { strategiesFor } from '../workload/strategies';
import { findLeaks, runMarker, sweepLeaks, sweepPooledServers } from './global-teardown';
import { integrationBackends, START_TIMEOUT_MS } from './harness';
import { poolMarker } from './pool';
import { tsChild } from './ts-child';
import type { AvailableIntegrationBackend } from './harness';

// jest's testTimeout is global, not per project: each case here starts a real server in a child process.
jest.setTimeout(START_TIMEOUT_MS);

const ROOT = path.resolve(__dirname, '..');
const SETTLE_MS = 3_000;
const POLL_MS = 100;
/** How long the kernel's parent-death signal may take to bring a server down once its Node parent is killed. */
const ORPHAN_EXIT_MS = 30_000;

/** Servers this machine starts itself: the ones whose cleanup sqltally owns. */
const owned = integrationBackends().filter(
  (b): b is AvailableIntegrationBackend => b.available && (b.provider === 'local' || b.provider === 'embedded') && !b.id.includes('@'),
);
const servers = owned.filter((b) => b.provider === 'local');

let runCounter = 0;
/** Each child gets its own run id, so its directories and processes can be found (and only its own). */
function childEnv(): NodeJS.ProcessEnv {
  runCounter += 1;
  return { ...process.env, SQLTALLY_RUN_ID: `${process.env['SQLTALLY_RUN_ID'] ?? 'leak'}c${process.pid}n${runCounter}` };
}

/** Runs TypeScript in a plain Node child (integration/register-ts.js), so signals reach exactly that one process. */
function spawnTs(code: string, env: NodeJS.ProcessEnv, ipc = false): ChildProcess {
  return spawn(process.execPath, [...tsChild(), '-e', code], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc' as const] : [])] });
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Resolves with the first stdout line that parses as JSON; rejects with stderr if the child exits first. */
function firstJsonLine<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line) as T);
    });
    child.once('exit', (code, signal) => reject(new Error(`child exited (${code ?? signal}) before reporting: ${err.slice(-2000)}`)));
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function settledLeaks(env: NodeJS.ProcessEnv): Promise<string[]> {
  const deadline = Date.now() + SETTLE_MS;
  let leaks = findLeaks(env);
  while (leaks.length > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    leaks = findLeaks(env);
  }
  sweepLeaks(leaks);
  return leaks.map((l) => l.what);
}

const HOLD = (id: string): string => `
  const { startBackend } = require('./containers/registry');
  startBackend(${JSON.stringify(id)}).then((b) => {
    console.log(JSON.stringify({ pid: b.pid ?? null, dataDir: b.dataDir ?? null }));
    setInterval(() => undefined, 1000);
  }, (err) => { console.error(err.message); process.exit(3); });
`;

/** A pool in a forked Node process (an IPC channel, as a Jest worker has) that waits until Jest terminates it. */
const POOL_HOLD = (id: string): string => `
  require('./integration/pool-worker').borrow(${JSON.stringify(id)}).then((s) => {
    console.log(JSON.stringify(s));
    setInterval(() => undefined, 1000);
  }, (err) => { console.error(err.message); process.exit(3); });
`;

/** describe.each refuses an empty table: say why there is nothing to run instead. */
function eachId(ids: string[], title: string, body: (id: string) => void): void {
  if (ids.length === 0) {
    describe.skip(`${title.replace('%s', '(none)')}: skipped: no backend is started by this machine in this run`, () => {
      it('needs a locally started backend', () => undefined);
    });
  } else describe.each(ids.map((id) => [id] as const))(title, body);
}

eachId(owned.map((b) => b.id), '%s: nothing outlives the Node process', (id) => {
  it.each(['SIGINT', 'SIGTERM'] as const)('stops the server and removes its data when Node gets %s', async (signal) => {
    const env = childEnv();
    const child = spawnTs(HOLD(id), env);
    const held = await firstJsonLine<{ pid: number | null; dataDir: string | null }>(child);
    expect(held.dataDir).not.toBeNull();
    expect(fs.existsSync(held.dataDir ?? '')).toBe(true);
    if (servers.some((s) => s.id === id)) expect(held.pid !== null && processAlive(held.pid)).toBe(true);

    child.kill(signal);
    const exit = await exitOf(child);
    // Re-raised after cleanup, so the shell sees death by the signal, as without sqltally.
    expect(exit.signal).toBe(signal);
    if (held.pid !== null) expect(processAlive(held.pid)).toBe(false);
    expect(fs.existsSync(held.dataDir ?? '')).toBe(false);
    expect(await settledLeaks(env)).toEqual([]);
  });
});

eachId(servers.map((b) => b.id), '%s: a killed Node process', (id) => {
  it('takes its server down with it (parent-death signal), leaving only the data directory to sweep', async () => {
    const env = childEnv();
    const child = spawnTs(HOLD(id), env);
    const held = await firstJsonLine<{ pid: number; dataDir: string }>(child);
    child.kill('SIGKILL');
    await exitOf(child);
    const deadline = Date.now() + ORPHAN_EXIT_MS;
    while (processAlive(held.pid) && Date.now() < deadline) await sleep(POLL_MS);
    const alive = processAlive(held.pid);
    // SIGKILL runs no handler, so the directory stays: the suite's teardown is what removes such leftovers.
    const leftovers = findLeaks(env);
    sweepLeaks(leftovers);
    expect(alive).toBe(false);
    expect(leftovers.filter((l) => l.kind === 'process')).toEqual([]);
  });
});

eachId(owned.map((b) => b.id), '%s: after a SIGKILL', (id) => {
  it('the next sqltally backends stops what is left, removes the data directory and lists it', async () => {
    const env = childEnv();
    const child = spawnTs(HOLD(id), env);
    const held = await firstJsonLine<{ pid: number | null; dataDir: string }>(child);
    child.kill('SIGKILL');
    await exitOf(child);
    // The record names the dead child, so it is stale at once, server or not; nothing else of it needs to settle.
    expect(fs.existsSync(held.dataDir)).toBe(true);
    expect(fs.existsSync(`${held.dataDir}.owner.json`)).toBe(true);

    const out: string[] = [];
    const log = jest.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
    let code: number;
    try {
      code = await main(['backends', '--json', 'sqlite']);
    } finally {
      log.mockRestore();
    }
    expect(code).toBe(0);
    const report = BackendsReportSchema.parse(JSON.parse(out.join('\n')));
    expect(report.cleaned.map((c) => c.dir)).toContain(held.dataDir);
    const cleaned = report.cleaned.find((c) => c.dir === held.dataDir);
    expect(cleaned?.ownerPid).toBe(child.pid);
    expect(cleaned?.bytes).toBeGreaterThan(0);
    expect(fs.existsSync(held.dataDir)).toBe(false);
    expect(fs.existsSync(`${held.dataDir}.owner.json`)).toBe(false);
    if (held.pid !== null) expect(processAlive(held.pid)).toBe(false);
    expect(await settledLeaks(env)).toEqual([]);
  });

  it('a sqltally run killed mid-workload leaves directories the next run removes', async () => {
    const env = childEnv();
    const strategy = strategiesFor(id)[0]!.name;
    const child = spawnTs(
      `require('./cli/main').main(['run', '--backends', ${JSON.stringify(id)}, '--strategies', '${strategy}', '--rows', '2000', '--hot-rows', '', '--repeats', '50', '--no-write']).then((c) => { process.exitCode = c; });`,
      env,
    );
    let err = '';
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    const exited = exitOf(child);
    // Killed once the first cell is under way: the backend is up and the workload is running.
    const deadline = Date.now() + START_TIMEOUT_MS / 2;
    while (!err.includes(`ready `) && Date.now() < deadline && child.exitCode === null) await sleep(POLL_MS);
    if (!err.includes('ready ')) {
      // 'exit' can come before the last of stderr has been read: wait for it, so the failure shows why.
      await new Promise((r) => (child.stderr?.readableEnded ? r(undefined) : child.stderr?.once('end', r)));
      throw new Error(`the run never got ready (exit ${child.exitCode ?? child.signalCode}): ${err}`);
    }
    await sleep(500);
    child.kill('SIGKILL');
    await exited;
    const left = findLeaks(env).filter((l) => l.kind === 'directory' && !l.path?.endsWith('.owner.json'));
    expect(left.length).toBeGreaterThan(0);

    const sweep = await sweepStalePrivateDirs(process.env);
    for (const l of left) expect(sweep.removed.map((r) => r.dir)).toContain(l.path);
    expect(await settledLeaks(env)).toEqual([]);
  });

  it('a directory whose owner is alive is left alone', async () => {
    const env = childEnv();
    const child = spawnTs(HOLD(id), env);
    const held = await firstJsonLine<{ pid: number | null; dataDir: string }>(child);
    try {
      const sweep = await sweepStalePrivateDirs(process.env);
      expect(sweep.removed.map((r) => r.dir)).not.toContain(held.dataDir);
      expect(fs.existsSync(held.dataDir)).toBe(true);
      if (held.pid !== null) expect(processAlive(held.pid)).toBe(true);
    } finally {
      child.kill('SIGINT');
      await exitOf(child);
    }
    expect(await settledLeaks(env)).toEqual([]);
  });
});

eachId(servers.map((b) => b.id), 'sqltally backends --check %s', (id) => {
  it('leaves nothing behind when interrupted with SIGINT mid-check', async () => {
    const env = childEnv();
    const child = spawnTs(`require('./cli/main').main(['backends', '--check', ${JSON.stringify(id)}]).then((c) => { process.exitCode = c; });`, env);
    const exited = exitOf(child);
    // Interrupt as soon as the server process exists: the worst moment, mid-start.
    const deadline = Date.now() + START_TIMEOUT_MS / 2;
    let sawServer = false;
    while (!sawServer && Date.now() < deadline && child.exitCode === null) {
      sawServer = findLeaks(env).some((l) => l.kind === 'process');
      if (!sawServer) await sleep(POLL_MS);
    }
    expect(sawServer).toBe(true);
    child.kill('SIGINT');
    const exit = await exited;
    expect(exit.signal).toBe('SIGINT');
    expect(await settledLeaks(env)).toEqual([]);
  });
});

// What the worker leaves to teardown is the server's own shutdown: the slowest one to shut down (MySQL) shows it.
const slowestStop = [...servers].sort((a, b) => ['mysql', 'mariadb', 'postgres'].indexOf(a.backend) - ['mysql', 'mariadb', 'postgres'].indexOf(b.backend))[0];
eachId(slowestStop ? [slowestStop.id] : [], '%s: a pooled server in a Jest worker', (id) => {
  it('is told to stop as Jest ends the worker; global teardown then finds it gone and removes its data', async () => {
    const env = childEnv();
    // The way jest-runner runs test files: a forked jest-worker child, ended with end() when the run is over.
    const worker = new Worker(path.join(__dirname, 'pool-worker.ts'), {
      numWorkers: 1,
      exposedMethods: ['borrow'],
      forkOptions: { cwd: ROOT, env, execArgv: tsChild() },
    }) as Worker & { borrow(id: string): Promise<{ pid: number; dataDir: string }> };
    let held: { pid: number; dataDir: string } | undefined;
    try {
      held = await worker.borrow(id);
      expect(processAlive(held.pid)).toBe(true);
    } finally {
      // Jest gives an ending worker half a second, then SIGTERM, then SIGKILL: the worker only signals its servers.
      await worker.end();
    }
    expect(await sweepPooledServers(env)).toEqual([]);
    expect(processAlive(held.pid)).toBe(false);
    expect(fs.existsSync(held.dataDir)).toBe(false);
    expect(await settledLeaks(env)).toEqual([]);
  });
});

// The signal path is the pool's, whatever the server: the cheapest one to start shows it.
const cheapestServer = [...servers].sort((a, b) => Number(b.backend === 'postgres') - Number(a.backend === 'postgres'))[0];
eachId(cheapestServer ? [cheapestServer.id] : [], '%s: a pooled server of a worker Jest terminates', (id) => {
  it('is told to stop as the worker dies of SIGTERM; global teardown then finds it gone and removes its data', async () => {
    const env = childEnv();
    const child = spawnTs(POOL_HOLD(id), env, true);
    const held = await firstJsonLine<{ pid: number; dataDir: string }>(child);
    child.kill('SIGTERM');
    const exit = await exitOf(child);
    expect(exit.signal).toBe('SIGTERM');
    expect(await sweepPooledServers(env)).toEqual([]);
    expect(processAlive(held.pid)).toBe(false);
    expect(fs.existsSync(held.dataDir)).toBe(false);
    expect(await settledLeaks(env)).toEqual([]);
  });
});

describe('global teardown', () => {
  it('reports a pooled server still running after its worker ended, then kills it and removes its directory', async () => {
    const env = childEnv();
    // Stands in for a server that ignored its stop signal: a process working in a pooled server's directory.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), poolMarker(env)));
    const stuck = spawn('sleep', ['60'], { cwd: dir, stdio: 'ignore' });
    try {
      const problems = await sweepPooledServers(env, 300);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(new RegExp(`^pooled server still running 0\\.3 s after its worker ended \\(now killed\\): pid ${stuck.pid}: sleep 60`));
      await exitOf(stuck);
      expect(fs.existsSync(dir)).toBe(false);
    } finally {
      stuck.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("looks for leaks under the run's derived ids too (pools, child runs), which the per-run marker alone misses", () => {
    // Longer than a run tag holds, so the pool's tag is cut short and is no longer an extension of the run's.
    const base = childEnv();
    const env = { ...base, SQLTALLY_RUN_ID: `${base['SQLTALLY_RUN_ID']}padding0123456789` };
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${poolMarker(env)}left-`));
    try {
      expect(path.basename(dir).startsWith(runMarker(env))).toBe(false);
      expect(findLeaks(env).map((l) => l.path)).not.toContain(dir);
      expect(findLeaks(env, true).map((l) => l.path)).toContain(dir);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
