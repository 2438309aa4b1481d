// @waits 14: the CLI interrupted mid-cell on every backend, each run its own process.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { readReportFile } from '../../src/report/schema';
import { findLeaks } from '../global-teardown';
import { reportFiles } from '../report-files';
import { START_TIMEOUT_MS, describeEachBackend } from '../harness';
import { EVERY_PROVIDER, itForProvider } from './providers';
import { tsChild } from '../ts-child';
import { FAULT_ROWS, FAULT_TARGETS, FIRST_ROWS, faultEnv, scratchDir, type FaultTarget } from './fixture';

// Ctrl-C of `sqltally run` (a child process, as a person runs it) in the middle of a cell on a private server: the
// report of the cells done so far is written (status failed), the exit code is 130, and nothing is left behind.
jest.setTimeout(START_TIMEOUT_MS);

const ROOT = path.resolve(__dirname, '..', '..');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describeEachBackend((b) => {
  const target: FaultTarget = FAULT_TARGETS[b.backend];
  if ('noServer' in target) {
    // SQLite's Ctrl-C case (a synchronous workload) is in integration/bad-input.test.ts.
    it.skip(`Ctrl-C mid-run on a server: ${target.noServer}`, () => undefined);
    return;
  }

  itForProvider(b, EVERY_PROVIDER, 'SIGINT mid-cell: the failed report keeps the cells done so far, exit 130, nothing left running or on disk', async () => {
    const env = faultEnv('int');
    const dir = scratchDir('int');
    const out = path.join(dir, 'out');
    try {
      const argv = [
        'run',
        '--backends',
        b.id,
        '--strategies',
        target.strategy,
        '--rows',
        `${FIRST_ROWS},${FAULT_ROWS}`,
        '--hot-rows',
        '',
        '--driver-releases',
        'default',
        '--out',
        out,
      ];
      const code = `require('./src/cli/main').main(${JSON.stringify(argv)}).then((c) => { process.exitCode = c; });`;
      const child = spawn(process.execPath, [...tsChild(), '-e', code], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (c, s) => r({ code: c, signal: s })));
      const deadline = Date.now() + START_TIMEOUT_MS / 2;
      while (!err.includes(`${target.strategy} ${FIRST_ROWS}:`) && child.exitCode === null && Date.now() < deadline) await sleep(50);
      expect(err).toContain(`${target.strategy} ${FIRST_ROWS}: assert`);
      // Inside the 200 000-row cell: seconds of inserts on two busy cores.
      await sleep(500);
      child.kill('SIGINT');
      const exit = await exited;
      // On another exit the child's own words are the diagnosis: they go into the failure.
      expect({ ...exit, stderr: exit.code === 130 ? '' : err }).toEqual({ code: 130, signal: null, stderr: '' });
      expect(err).toContain('SIGINT: stopping after the window in flight');
      expect(err).toContain(`wrote ${path.join(out, 'report.json')}`);
      const report = readReportFile(path.join(out, 'report.json'));
      expect(report.status).toBe('failed');
      expect(report.failure?.message).toMatch(/^interrupted \(SIGINT\) after \d+ cell\(s\): the cells measured before are kept/);
      expect(report.failure?.backend).toContain(b.backend);
      expect(report.cells.find((c) => c.rows === FIRST_ROWS)).toMatchObject({ verdict: { kind: 'assert' }, verifiedRows: FIRST_ROWS });
      for (const c of report.cells.filter((x) => x.rows === FAULT_ROWS)) expect(c.verdict.kind).not.toBe('assert');
      // The servers outlive the first Ctrl-C until the window in flight has ended: its cell is in the report, given up
      // by the signal, with the rows committed anyway read through a fresh connection.
      expect(report.cells.find((c) => c.rows === FAULT_ROWS)).toMatchObject({
        verdict: { kind: 'incomplete' },
        error: { message: expect.stringMatching(/interrupted \(SIGINT\).*read through a fresh connection/) },
      });
      expect(fs.readdirSync(out).sort()).toEqual(reportFiles(report));
      expect(findLeaks(env)).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
