// @waits 45: servers started and their Node process signalled, one after another on every backend.
import fs from 'node:fs';
import { processAlive } from '../src/backends/live';
import { START_TIMEOUT_MS } from './harness';
import { POLL_MS, ORPHAN_EXIT_MS, childEnv, eachId, exitOf, firstJsonLine, HOLD, owned, servers, settledLeaks, sleep, spawnTs } from './leaks.fixture';
import { findLeaks, sweepLeaks } from './global-teardown';

// jest's testTimeout is global, not per project: each case here starts a real server in a child process.
jest.setTimeout(START_TIMEOUT_MS);

eachId(
  owned.map((b) => b.id),
  '%s: nothing outlives the Node process',
  (id) => {
    it.each(['SIGINT', 'SIGTERM'] as const)('stops the server and removes its data when Node gets %s', async (signal) => {
      const env = childEnv('signals');
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
  },
);

eachId(
  servers.map((b) => b.id),
  '%s: a killed Node process',
  (id) => {
    it('takes its server down with it (parent-death signal), leaving only the data directory to sweep', async () => {
      const env = childEnv('signals');
      const child = spawnTs(HOLD(id), env);
      const held = await firstJsonLine<{ pid: number; dataDir: string }>(child);
      child.kill('SIGKILL');
      await exitOf(child);
      const deadline = Date.now() + ORPHAN_EXIT_MS;
      // The server's own children go after it: PostgreSQL's logger exits once the last writer of its pipe is gone,
      // which one run saw still alive in the poll right after the postmaster's death.
      const processesLeft = (): boolean => findLeaks(env).some((l) => l.kind === 'process');
      while ((processAlive(held.pid) || processesLeft()) && Date.now() < deadline) await sleep(POLL_MS);
      const alive = processAlive(held.pid);
      // SIGKILL runs no handler, so the directory stays: the suite's teardown is what removes such leftovers.
      const leftovers = findLeaks(env);
      sweepLeaks(leftovers);
      expect(alive).toBe(false);
      expect(leftovers.filter((l) => l.kind === 'process')).toEqual([]);
    });
  },
);

const START_POLL_MS = 10;

eachId(
  servers.map((b) => b.id),
  'sqltally backends --check %s',
  (id) => {
    it('leaves nothing behind when interrupted with SIGINT mid-check', async () => {
      const env = childEnv('signals');
      const child = spawnTs(`require('./src/cli/main').main(['backends', '--check', ${JSON.stringify(id)}]).then((c) => { process.exitCode = c; });`, env);
      const exited = exitOf(child);
      // Interrupt as soon as the server process exists: the worst moment, mid-start.
      const deadline = Date.now() + START_TIMEOUT_MS / 2;
      let sawServer = false;
      // Polled finely: a PostgreSQL from its template data directory starts, answers the check and stops in a few
      // hundred ms on a fast host, and one full run of the suite (stop 32) saw the child exit between two 100 ms polls.
      while (!sawServer && Date.now() < deadline && child.exitCode === null) {
        sawServer = findLeaks(env).some((l) => l.kind === 'process');
        if (!sawServer) await sleep(START_POLL_MS);
      }
      expect(sawServer).toBe(true);
      child.kill('SIGINT');
      const exit = await exited;
      expect(exit.signal).toBe('SIGINT');
      expect(await settledLeaks(env)).toEqual([]);
    });
  },
);
