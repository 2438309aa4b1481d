/**
 * The wire proxy alone in a process of its own, for profilers: prints its port, runs until stdin ends, then
 * closes and exits normally (so `node --cpu-prof` writes its profile and `strace -c` its table).
 *
 *   node --cpu-prof --import tsx bench/wire-proxy-serve.ts postgres 127.0.0.1 5432
 */
import { startWireProxy } from '../src/wire/proxy';

async function main(): Promise<void> {
  const [protocol, host, port] = process.argv.slice(2);
  if ((protocol !== 'postgres' && protocol !== 'mysql') || !host || !port) throw new Error('usage: wire-proxy-serve.ts postgres|mysql HOST PORT');
  const proxy = await startWireProxy({ protocol, target: { host, port: Number(port) } });
  const first = proxy.snapshot();
  process.stdout.write(`${proxy.port}\n`);
  process.stdin.resume();
  await new Promise<void>((resolve) => process.stdin.on('end', resolve));
  const counts = proxy.diff(first, proxy.snapshot());
  process.stderr.write(`${JSON.stringify({ roundTrips: counts.roundTrips, commandsTotal: counts.commandsTotal, incomplete: counts.incomplete })}\n`);
  await proxy.close();
  process.exit(0);
}

void main();
