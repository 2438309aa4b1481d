/**
 * Running a bench child under callgrind: the child bundled with esbuild (so tsx's loader, and its start-up under
 * valgrind, stay out of the count; packages and sqltally's dist/ load at run time), and the instructions of one run
 * of it, node with V8's `--predictable` (the compiler and the collector on the main thread at deterministic points).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** Bundles `entry` into `dir`; packages stay external (resolved through the child's NODE_PATH). */
export function bundleChild(entry: string, dir: string, name: string): string {
  const esbuild = require('esbuild') as typeof import('esbuild');
  const outfile = join(dir, name);
  esbuild.buildSync({ entryPoints: [entry], bundle: true, platform: 'node', target: 'node20', outfile, logLevel: 'error', packages: 'external' });
  return outfile;
}

/** The instructions of one run of `bundle` with `args` under callgrind, and what it printed. */
export function callgrindRun(bundle: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ instructions: number; stdout: string }> {
  const child = spawn('valgrind', ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, '--predictable', bundle, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      const match = /Collected : (\d+)/.exec(stderr);
      if (code !== 0 || !match) reject(new Error(`valgrind exited ${code} (${args.join(' ')}): ${stdout.slice(-1000)}${stderr.slice(-2000)}`));
      else resolve({ instructions: Number(match[1]), stdout });
    });
  });
}
