// @waits 45: what killed runs leave on every backend, and who sweeps it (the next run, global teardown).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'jest-worker';
import { processAlive } from '../src/backends/live';
import { describeSweep, sweepStalePrivateDirs } from '../src/backends/stale';
import { BackendsReportSchema } from '../src/cli/backends';
import { main } from '../src/cli/main';
import { strategiesFor } from '../src/workload/strategies';
import { findLeaks, runMarker, sweepPooledServers } from './global-teardown';
import { START_TIMEOUT_MS } from './harness';
import { childEnv, eachId, exitOf, firstJsonLine, HOLD, owned, POLL_MS, POOL_HOLD, ROOT, servers, settledLeaks, sleep, spawnTs } from './leaks.fixture';
import { poolMarker } from './pool';
import { tsChild } from './ts-child';

// jest's testTimeout is global, not per project: each case here starts a real server in a child process.
jest.setTimeout(START_TIMEOUT_MS);

const SWEEP_ELSEWHERE_MS = 20_000;

/**
 * Whether another sqltally process of the run (a `sqltally run` of another test file sweeps at its start) removed a
 * stale directory before this file's own sweep: MySQL's data lives in the shared root filesystem, not under TMPDIR.
 * Said in the log; the directory must be gone either way. False when this file's sweep removed it.
 */
async function sweptElsewhere(dir: string, ours: unknown, env: NodeJS.ProcessEnv): Promise<boolean> {
  if (ours !== undefined) return false;
  // The other sweep may still be stopping the server, or ours met it mid-stop and left the directory: sweeping
  // again is what the next run would do.
  const seen: string[] = [];
  for (const deadline = Date.now() + SWEEP_ELSEWHERE_MS; fs.existsSync(dir) && Date.now() < deadline;) {
    await sleep(POLL_MS * 10);
    const again = await sweepStalePrivateDirs(env);
    seen.push(...describeSweep(again).filter((line) => line.includes(path.basename(dir))));
  }
  if (fs.existsSync(dir)) {
    const owner = `${dir}.owner.json`;
    const record = fs.existsSync(owner) ? fs.readFileSync(owner, 'utf8') : 'no owner record';
    throw new Error(`${dir} is still there after ${SWEEP_ELSEWHERE_MS} ms of sweeps: ${seen.join('; ') || 'no sweep named it'}; ${record}`);
  }
  console.log(`${dir}: not removed by this file's first sweep${seen.length > 0 ? ` (${seen.join('; ')})` : ', but by another process'}`);
  return true;
}

/** TMPDIRs of this file's own (see the first case), removed whatever the cases did. */
const privateTmpDirs: string[] = [];
afterAll(() => {
  for (const dir of privateTmpDirs) fs.rmSync(dir, { recursive: true, force: true });
});

eachId(
  owned.map((b) => b.id),
  '%s: after a SIGKILL',
  (id) => {
    it('the next sqltally backends stops what is left, removes the data directory and lists it', async () => {
      // A TMPDIR of this test's own, since any sqltally process of the run sweeps the shared one and could take the dead
      // child's directory first. Short: PostgreSQL's socket path inside it must stay under 107 bytes.
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sw-'));
      privateTmpDirs.push(tmp);
      // PostgreSQL runs as its own OS user and must get through to its data directory, as through the shared TMPDIR.
      fs.chmodSync(tmp, 0o755);
      const env = { ...childEnv('sweeps'), TMPDIR: tmp };
      const child = spawnTs(HOLD(id), env);
      const held = await firstJsonLine<{ pid: number | null; dataDir: string }>(child);
      child.kill('SIGKILL');
      await exitOf(child);
      // The record names the dead child, so it is stale at once, server or not; nothing else of it needs to settle.
      expect(fs.existsSync(held.dataDir)).toBe(true);
      expect(fs.existsSync(`${held.dataDir}.owner.json`)).toBe(true);

      const out: string[] = [];
      const log = jest.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
      const sharedTmp = process.env['TMPDIR'];
      let code: number;
      try {
        process.env['TMPDIR'] = tmp;
        code = await main(['backends', '--json', 'sqlite']);
      } finally {
        // Assigning undefined would store the string "undefined".
        if (sharedTmp === undefined) delete process.env['TMPDIR'];
        else process.env['TMPDIR'] = sharedTmp;
        log.mockRestore();
      }
      expect(code).toBe(0);
      const report = BackendsReportSchema.parse(JSON.parse(out.join('\n')));
      const cleaned = report.cleaned.find((c) => c.dir === held.dataDir);
      if (await sweptElsewhere(held.dataDir, cleaned, env)) {
        expect(fs.existsSync(`${held.dataDir}.owner.json`)).toBe(false);
      } else {
        expect(cleaned?.ownerPid).toBe(child.pid);
        expect(cleaned?.bytes).toBeGreaterThan(0);
      }
      expect(fs.existsSync(held.dataDir)).toBe(false);
      expect(fs.existsSync(`${held.dataDir}.owner.json`)).toBe(false);
      if (held.pid !== null) expect(processAlive(held.pid)).toBe(false);
      expect(await settledLeaks(env)).toEqual([]);
    });

    it('a sqltally run killed mid-workload leaves directories the next run removes', async () => {
      // A TMPDIR of this test's own, as above: a `sqltally run` of another test file sweeps the shared one.
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sw-'));
      privateTmpDirs.push(tmp);
      fs.chmodSync(tmp, 0o755);
      const env = { ...childEnv('sweeps'), TMPDIR: tmp };
      const strategy = strategiesFor(id)[0]!.name;
      const child = spawnTs(
        `require('./src/cli/main').main(['run', '--backends', ${JSON.stringify(id)}, '--strategies', '${strategy}', '--rows', '2000', '--hot-rows', '', '--repeats', '50', '--no-write']).then((c) => { process.exitCode = c; });`,
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

      const sweep = await sweepStalePrivateDirs(env);
      for (const l of left)
        await sweptElsewhere(
          l.path!,
          sweep.removed.find((r) => r.dir === l.path),
          env,
        );
      expect(await settledLeaks(env)).toEqual([]);
    });

    it('a directory whose owner is alive is left alone', async () => {
      const env = childEnv('sweeps');
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
  },
);

// What the worker leaves to teardown is the server's own shutdown: the slowest one to shut down (MySQL) shows it.
const slowestStop = [...servers].sort((a, b) => ['mysql', 'mariadb', 'postgres'].indexOf(a.backend) - ['mysql', 'mariadb', 'postgres'].indexOf(b.backend))[0];
eachId(slowestStop ? [slowestStop.id] : [], '%s: a pooled server in a Jest worker', (id) => {
  it('is told to stop as Jest ends the worker; global teardown then finds it gone and removes its data', async () => {
    const env = childEnv('sweeps');
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
    const env = childEnv('sweeps');
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
    const env = childEnv('sweeps');
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
    const base = childEnv('sweeps');
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
