import { main } from '../src/cli/main';

/** Runs the CLI in-process with stdout and stderr captured as one text, and `env` added to process.env for the call. */
export async function cli(argv: string[], env: Record<string, string> = {}): Promise<{ code: number; said: string }> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  const said: string[] = [];
  const capture = (...a: unknown[]) => void said.push(a.map(String).join(' '));
  const spies = [
    jest.spyOn(console, 'log').mockImplementation(capture),
    jest.spyOn(console, 'error').mockImplementation(capture),
    jest.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => said.push(String(c)) > 0),
    jest.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => said.push(String(c)) > 0),
  ];
  try {
    return { code: await main(argv), said: said.join('\n') };
  } finally {
    for (const s of spies) s.mockRestore();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
