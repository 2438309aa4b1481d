import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { findLeaks, sweepLeaks } from './global-teardown';
import { integrationBackends } from './harness';
import { tsChild } from './ts-child';
import type { AvailableIntegrationBackend } from './harness';

// What the two leak files share (leaks.test.ts: signals to a Node process holding a server; leaks-sweep.test.ts:
// what a killed run leaves and who sweeps it), split so their waits run in parallel.

export const ROOT = path.resolve(__dirname, '..');
const SETTLE_MS = 3_000;
export const POLL_MS = 100;
/** How long the kernel's parent-death signal may take to bring a server down once its Node parent is killed. */
export const ORPHAN_EXIT_MS = 30_000;

/** Servers this machine starts itself: the ones whose cleanup sqltally owns. */
export const owned = integrationBackends().filter(
  (b): b is AvailableIntegrationBackend => b.available && (b.provider === 'local' || b.provider === 'embedded') && !b.id.includes('@'),
);
export const servers = owned.filter((b) => b.provider === 'local');

let runCounter = 0;
/**
 * Each child gets its own run id, so its directories and processes can be found (and only its own). `file` tells the
 * two leak files apart: run one after the other in one worker, both count from 1 in the same process.
 */
export function childEnv(file: 'signals' | 'sweeps'): NodeJS.ProcessEnv {
  runCounter += 1;
  return { ...process.env, SQLTALLY_RUN_ID: `${process.env['SQLTALLY_RUN_ID'] ?? 'leak'}${file[0]}${process.pid}n${runCounter}` };
}

/** Runs TypeScript in a plain Node child (integration/register-ts.js), so signals reach exactly that one process. */
export function spawnTs(code: string, env: NodeJS.ProcessEnv, ipc = false): ChildProcess {
  return spawn(process.execPath, [...tsChild(), '-e', code], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc' as const] : [])] });
}

export function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Resolves with the first stdout line that parses as JSON; rejects with stderr if the child exits first. */
export function firstJsonLine<T>(child: ChildProcess): Promise<T> {
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

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function settledLeaks(env: NodeJS.ProcessEnv): Promise<string[]> {
  const deadline = Date.now() + SETTLE_MS;
  let leaks = findLeaks(env);
  while (leaks.length > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    leaks = findLeaks(env);
  }
  sweepLeaks(leaks);
  return leaks.map((l) => l.what);
}

export const HOLD = (id: string): string => `
  const { startBackend } = require('./src/backends/registry');
  startBackend(${JSON.stringify(id)}).then((b) => {
    console.log(JSON.stringify({ pid: b.pid ?? null, dataDir: b.dataDir ?? null }));
    setInterval(() => undefined, 1000);
  }, (err) => { console.error(err.message); process.exit(3); });
`;

/** A pool in a forked Node process (an IPC channel, as a Jest worker has) that waits until Jest terminates it. */
export const POOL_HOLD = (id: string): string => `
  require('./integration/pool-worker').borrow(${JSON.stringify(id)}).then((s) => {
    console.log(JSON.stringify(s));
    setInterval(() => undefined, 1000);
  }, (err) => { console.error(err.message); process.exit(3); });
`;

/** describe.each refuses an empty table: say why there is nothing to run instead. */
export function eachId(ids: string[], title: string, body: (id: string) => void): void {
  if (ids.length === 0) {
    describe.skip(`${title.replace('%s', '(none)')}: skipped: no backend is started by this machine in this run`, () => {
      it('needs a locally started backend', () => undefined);
    });
  } else describe.each(ids.map((id) => [id] as const))(title, body);
}
