import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** Server binaries live in sbin on Debian, which a non-root PATH usually lacks. */
const SBIN_DIRS = ['/usr/sbin', '/usr/local/sbin', '/sbin'];

/** First directory in `dirs` holding an executable `name`, as an absolute path. */
export function findExecutable(name: string, dirs: readonly string[]): string | undefined {
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/**
 * Where to look for a backend's binaries: `SQLTALLY_<BACKEND>_BINDIR` alone when set (so a test can simulate
 * "not installed"), else PATH followed by the sbin directories.
 */
export function searchDirs(env: NodeJS.ProcessEnv, backend: string): { dirs: string[]; described: string } {
  const key = `SQLTALLY_${backend.toUpperCase()}_BINDIR`;
  const forced = env[key];
  if (forced !== undefined) return { dirs: forced.split(path.delimiter), described: `${key}=${forced}` };
  const fromPath = (env['PATH'] ?? '').split(path.delimiter).filter(Boolean);
  return { dirs: [...new Set([...fromPath, ...SBIN_DIRS])], described: 'PATH or /usr/sbin' };
}

/**
 * Outputs already read in this process, by binary, arguments and file identity: every start resolves its backend
 * again, asking each candidate install the same questions. A binary replaced, resized or touched since is asked again.
 */
const OUTPUTS = new Map<string, { identity: string; output: Promise<string | undefined> }>();

/** Output of `<binary> --version` (or other args), or undefined if it would not run. */
export function versionOutput(binary: string, args: string[] = ['--version'], timeoutMs = 10_000): Promise<string | undefined> {
  let identity: string | undefined;
  try {
    const st = fs.statSync(binary);
    identity = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  } catch {
    // Not a path this process can stat (a name for PATH, or gone): asked every time.
  }
  const key = `${binary}\0${args.join('\0')}`;
  const known = identity === undefined ? undefined : OUTPUTS.get(key);
  if (known && known.identity === identity) return known.output;
  const output = new Promise<string | undefined>((resolve) => {
    execFile(binary, args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      const text = `${stdout ?? ''}${stderr ?? ''}`.trim();
      resolve(err && !text ? undefined : text);
    });
  });
  if (identity !== undefined) {
    OUTPUTS.set(key, { identity, output });
    // A binary that would not run (a timeout on a loaded machine, say) is asked again next time.
    void output.then((text) => {
      if (text === undefined && OUTPUTS.get(key)?.output === output) OUTPUTS.delete(key);
    });
  }
  return output;
}
