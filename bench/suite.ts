import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { childrenCpuMs } from './children-cpu';

/**
 * The two rows of issue 15's table that are whole commands rather than calls:
 *
 * - `--what test`: `npx jest` once, as `npm test` runs it (the environment passes through, so SQLTALLY_REQUIRE and
 *   SQLTALLY_BACKENDS apply): wall time, the CPU of what it ran (user + system of every descendant reaped through
 *   this process, from its `cutime + cstime`: Jest's workers, the servers they stopped, the CLI children; the pooled
 *   servers a worker leaves to global teardown are reparented to init when it exits, so their CPU is not in it: use
 *   process accounting, `accton` and `sa -a`, for every process), and the longest files. Goal: 120 s on two cores.
 * - `--what report`: the default main job (`sqltally run`) into a temporary directory: the size of each file it
 *   writes and the cell count. Goal: report.json <= 1 MB with every count and raw timing sample kept.
 *
 * One run each: the figure is the command's, and two runs of the same commit on the same host have differed by
 * 10-15% in wall time, so compare commits by running this on both, alternately. Nothing is asserted.
 *
 *   npx tsx bench/suite.ts [--what test,report]
 */

const ROOT = path.join(__dirname, '..');
const TEST_GOAL_S = 120;
const REPORT_GOAL_BYTES = 1_000_000;

function run(command: string, args: string[], quiet: boolean): Promise<{ code: number | null; wallS: number; cpuS: number; out: string }> {
  return new Promise((resolve, reject) => {
    const cpu0 = childrenCpuMs();
    const t0 = performance.now();
    const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let out = '';
    const keep = (chunk: Buffer): void => {
      out = (out + chunk.toString('utf8')).slice(-20_000);
      if (!quiet) process.stderr.write(chunk);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, wallS: (performance.now() - t0) / 1000, cpuS: (childrenCpuMs() - cpu0) / 1000, out }));
  });
}

interface JestJson {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  testResults: { name: string; startTime: number; endTime: number }[];
}

async function testRow(): Promise<number> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-bench-suite-'));
  try {
    const json = path.join(scratch, 'jest.json');
    const r = await run(path.join(ROOT, 'node_modules', '.bin', 'jest'), ['--json', `--outputFile=${json}`], true);
    const result = JSON.parse(fs.readFileSync(json, 'utf8')) as JestJson;
    const cores = os.cpus().length;
    console.log(
      `npm test (jest): exit ${r.code}, ${result.numPassedTests} passed, ${result.numFailedTests} failed, ${result.numPendingTests} skipped; ` +
        `wall ${r.wallS.toFixed(1)} s (goal <= ${TEST_GOAL_S} s on 2 cores), CPU of what it reaped ${r.cpuS.toFixed(1)} s ` +
        `= ${(r.cpuS / r.wallS).toFixed(2)} of ${cores} cores on average (pooled servers stopped at teardown not included)`,
    );
    const longest = result.testResults
      .map((t) => ({ file: path.relative(ROOT, t.name), s: (t.endTime - t.startTime) / 1000 }))
      .sort((a, b) => b.s - a.s)
      .slice(0, 8);
    console.log(`  longest files (wall, while sharing the cores): ${longest.map((l) => `${l.file} ${l.s.toFixed(1)} s`).join(', ')}`);
    return r.code === 0 ? 0 : 1;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

async function reportRow(): Promise<number> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sqltally-bench-report-'));
  try {
    const out = path.join(scratch, 'report');
    const r = await run(process.execPath, [path.join(ROOT, 'bin', 'sqltally.js'), 'run', '--out', out], true);
    if (r.code !== 0) {
      console.log(`the main job exited ${r.code}; its last output:\n${r.out.split('\n').slice(-15).join('\n')}`);
      return 1;
    }
    const sizes = fs
      .readdirSync(out)
      .sort()
      .map((f) => `${f} ${(fs.statSync(path.join(out, f)).size / 1000).toFixed(0)} KB`);
    const report = JSON.parse(fs.readFileSync(path.join(out, 'report.json'), 'utf8')) as { cells: unknown[]; backends: { name: string }[] };
    const bytes = fs.statSync(path.join(out, 'report.json')).size;
    console.log(
      `the default main job: ${report.cells.length} cells on ${report.backends.map((b) => b.name).join(', ')} in ${r.wallS.toFixed(0)} s; ` +
        `report.json ${(bytes / 1000).toFixed(0)} KB (goal <= ${REPORT_GOAL_BYTES / 1000} KB, ${bytes <= REPORT_GOAL_BYTES ? 'OK' : 'ABOVE'}); every file: ${sizes.join(', ')}`,
    );
    return 0;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

const ROWS = { test: testRow, report: reportRow } as const;

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { what: { type: 'string', default: 'test,report' } } });
  let code = 0;
  for (const name of (values.what ?? '').split(',').filter(Boolean)) {
    const row = ROWS[name as keyof typeof ROWS];
    if (!row) {
      console.error(`unknown --what ${name}; known: ${Object.keys(ROWS).join(', ')}`);
      return 2;
    }
    code = Math.max(code, await row());
  }
  return code;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
