/**
 * Runs every benchmark, one after another, each in its own process so one's servers and heap never colour the
 * next. Every figure is a ratio of two things measured side by side in the same process (wrapped vs unwrapped,
 * proxied vs direct, strategy vs raw SQL) or a median with its sample count: never a bare wall-clock number to
 * compare across machines. Nothing here is asserted; tests never gate on time.
 *
 *   npm run bench                     # all of them
 *   npm run bench -- settle wire      # a subset, by name
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const BENCHES = {
  driver: {
    file: 'driver-overhead.ts',
    what: 'driver-layer counting proxy (into a capture window): wrapped / unwrapped 5000-row insert per strategy, proxy cost per call, one call binding 600/6000/30000 values, a window of 1,000,000 calls',
  },
  'driver-control': { file: 'driver-overhead.ts', args: ['--control'], what: 'the same with raw on both sides: the noise floor of every driver figure' },
  deferred: {
    file: 'deferred-cost.ts',
    what: "following a measured function's async work (async_hooks, window only): tracked / untracked CPU per awaited call and per empty window, SQLite, in plain Node and under Jest",
    args: ['--jest'],
  },
  'deferred-cpu': {
    file: 'deferred-cpu.ts',
    what: 'the same in callgrind instructions per awaited call (no database, the hooks alone, SQLite) and per empty window; takes minutes',
    args: ['--scenarios', 'floor,floor-hooks,sqlite,sqlite-empty'],
  },
  'driver-paths': {
    file: 'driver-paths.ts',
    what: "each driver's fast path against its plain one (SQLTALLY_DRIVER_PATH=plain): plain/fast CPU per counted call beside a fast/fast control",
  },
  'deferred-control': { file: 'deferred-cost.ts', args: ['--control', '--jest'], what: 'the same untracked on both sides: its noise floor' },
  'driver-jest': {
    file: 'driver-jest.ts',
    what: 'the driver proxy under Jest (its vm context makes each global lookup ~250 ns) beside plain Node: per-row-tx and prepared SELECT 1, counted / raw CPU',
  },
  'driver-jest-control': { file: 'driver-jest.ts', args: ['--control'], what: 'the same with raw on both sides: its noise floor' },
  'driver-cpu': {
    file: 'driver-cpu.ts',
    what: 'driver-layer proxy: callgrind instructions per call (select, per-row) and per 30000-value statement; takes minutes',
  },
  wire: {
    file: 'wire-overhead.ts',
    what: 'wire proxy: proxied / direct 5000-row insert on MariaDB and PostgreSQL, beside the direct / direct noise floor; proxy CPU per MB and per command',
  },
  'wire-cost': {
    file: 'wire-cost.ts',
    what: 'wire proxy per round trip: pgbench -S (1, 4 clients), TPC-B, 5000 single-row INSERTs (pg, mysql2), mysqlslap SELECT 1, one 5000-row INSERT; proxied / direct beside direct / direct',
  },
  'passive-parse': {
    file: 'passive-parse.ts',
    what: 'the passive wire capture (--wire passive): CPU per round trip of its parser replaying a recorded pgbench -S capture, part by part; needs tcpdump and CAP_NET_RAW',
  },
  'wire-profile': {
    file: 'wire-profile.ts',
    what: 'the wire proxy alone in a child under pgbench -S: node --cpu-prof self time, strace -c -f system calls per round trip',
  },
  'window-parts': {
    file: 'window-parts.ts',
    what: 'what a counted window adds to a per-row strategy, part by part (deferred-work tracking, wire proxy, server readings, driver wrapper) against the uninstrumented time, pg and (--backend mariadb) mysql2',
  },
  'window-census': {
    file: 'window-census.ts',
    what: 'async resources a counted per-row window makes, and the stacks the deferred-work tracking takes, per row (counted, so the same under load)',
  },
  'wire-cpu': {
    file: 'wire-cpu.ts',
    what: 'wire parsers: CPU per MB and per command replaying recorded traffic (instruction counts: wire-cpu.ts --callgrind)',
  },
  settle: { file: 'settle.ts', what: 'PostgreSQL statistics settle time after a 5000-row insert' },
  'settle-race': {
    file: 'settle-race.ts',
    what: "per-connection readings right after one INSERT's answer that miss it: unsettled, settled by the driver, settled by the wire proxy (MariaDB, MySQL, PostgreSQL)",
  },
  raw: { file: 'strategy-vs-raw.ts', what: 'each insert strategy / the raw-SQL twin, 5000 rows' },
  start: {
    file: 'server-start.ts',
    what: "a private server's start and stop from its template data directory beside one initialised first (mariadb-install-db, initdb), children's CPU and wall, with a template/template control",
  },
  suite: { file: 'suite.ts', args: ['--what', 'test'], what: 'npm test once (jest): wall, CPU of what it reaped, the longest files; takes minutes' },
  report: { file: 'suite.ts', args: ['--what', 'report'], what: "the default main job's files and their sizes (report.json <= 1 MB); takes minutes" },
  caller: { file: 'caller-capture.ts', what: 'captureCaller: ns per call at 0, 10 and 30 package frames, with its noise floor' },
  fingerprint: { file: 'fingerprint.ts', what: 'fingerprint of a 200 KB multi-row INSERT, against a bare pass over the same text' },
} as const satisfies Record<string, { file: string; what: string; args?: readonly string[] }>;

function main(argv: string[]): number {
  const wanted = argv.length > 0 ? argv : Object.keys(BENCHES);
  let failed = 0;
  for (const name of wanted) {
    const bench = BENCHES[name as keyof typeof BENCHES];
    if (!bench) {
      console.error(`unknown bench "${name}"; known: ${Object.keys(BENCHES).join(', ')}`);
      return 2;
    }
    console.log(`\n== ${name}: ${bench.what}`);
    const tsx = join(__dirname, '..', 'node_modules', '.bin', 'tsx');
    const args: readonly string[] = 'args' in bench ? bench.args : [];
    // --expose-gc: the driver bench collects garbage before each timed run, so one run never pays for another's.
    const result = spawnSync(tsx, [join(__dirname, bench.file), ...args], {
      stdio: 'inherit',
      env: { ...process.env, NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --expose-gc`.trim() },
    });
    if (result.status !== 0) {
      console.error(`bench ${name} exited ${result.status ?? result.signal}`);
      failed++;
    }
  }
  return failed === 0 ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
