/**
 * Self time of `node --cpu-prof` profiles grouped by whose code ran it, to compare two runs that differ in one part.
 *
 *   npx tsx bench/cpuprofile-parts.ts [--per N] [--top 15] a.cpuprofile [b.cpuprofile ...]
 *
 * Groups: sqltally's deferred-work tracking, its wire proxy, its driver wrappers and recorder, the rest of sqltally,
 * each driver package, Node's streams/net internals, V8's garbage collector, the idle loop, and everything else.
 * Milliseconds are divided by `--per` (the windows each run timed), so two runs with the same start-up differ by
 * what each window cost. The top functions by self time follow, per profile.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const GROUPS: [string, RegExp][] = [
  ['sqltally deferred-work', /\/capture\/deferred-work\.js/],
  ['sqltally wire', /\/dist\/wire\//],
  ['sqltally driver', /\/dist\/driver\/|\/dist\/sql\//],
  ['sqltally other', /\/dist\//],
  ['pg', /node_modules\/(pg|pg-protocol|pg-types|pgpass|pg-pool)\//],
  ['mysql2', /node_modules\/mysql2\//],
  ['other packages', /node_modules\//],
  ['node async_hooks', /^node:internal\/async_hooks|^node:async_hooks|promise_hooks/],
  ['node streams/net', /^node:(internal\/streams|net|stream|internal\/stream_base_commons|internal\/net)/],
  ['node other', /^node:/],
];

function groupOf(node: ProfileNode): string {
  const { url, functionName } = node.callFrame;
  if (functionName === '(garbage collector)') return 'gc';
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(program)') return 'program';
  for (const [name, re] of GROUPS) if (re.test(url)) return name;
  return url ? 'other' : `native ${functionName}`;
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { per: { type: 'string', default: '1' }, top: { type: 'string', default: '15' } },
  });
  const per = Number(values.per);
  const tables = positionals.map((file) => {
    const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    const groups = new Map<string, number>();
    const fns = new Map<string, number>();
    // Each sample's time is the delta to the next one.
    for (let i = 0; i < p.samples.length; i++) {
      const n = byId.get(p.samples[i]!)!;
      const us = p.timeDeltas[i + 1] ?? 0;
      const g = groupOf(n);
      groups.set(g, (groups.get(g) ?? 0) + us);
      const url = n.callFrame.url.replace(/^.*\/(node_modules|dist)\//, '$1/').replace(/^node:/, '');
      const name = `${n.callFrame.functionName || '(anonymous)'} ${url ? `${url}:${n.callFrame.lineNumber + 1}` : ''}`.trim();
      fns.set(name, (fns.get(name) ?? 0) + us);
    }
    return { file: basename(file), groups, fns, totalUs: p.endTime - p.startTime };
  });
  const names = [...new Set(tables.flatMap((t) => [...t.groups.keys()]))].sort();
  console.log(`ms per window (${per} a run), self time by group`);
  console.log(`${'group'.padEnd(24)}${tables.map((t) => t.file.slice(0, 22).padStart(24)).join('')}`);
  for (const g of names) console.log(`${g.padEnd(24)}${tables.map((t) => ((t.groups.get(g) ?? 0) / 1000 / per).toFixed(2).padStart(24)).join('')}`);
  console.log(
    `${'busy (not idle)'.padEnd(24)}${tables.map((t) => ([...t.groups].filter(([g]) => g !== 'idle').reduce((s, [, v]) => s + v, 0) / 1000 / per).toFixed(2).padStart(24)).join('')}`,
  );
  for (const t of tables) {
    console.log(`\n${t.file}: top self time, ms per window`);
    for (const [name, us] of [...t.fns].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top)))
      console.log(`  ${(us / 1000 / per).toFixed(3).padStart(8)}  ${name}`);
  }
}

main();
