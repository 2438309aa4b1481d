import type { Tally } from '../capture/tally';
import { isFingerprintId } from '../sql/fingerprint';
import { ShapeStatsSchema } from '../sql/shapes';
import type { DriverLayerWithShapes, ShapeStat } from '../sql/shapes';

/** Options of `toHaveNoRepeatedShapes`. */
export interface RepeatedShapesOptions {
  /**
   * A shape fails when it ran this many times or more in the window. An integer, at least 2; default 2: the
   * matcher's name taken literally, every shape once. Raise it for a loop that is meant to be there.
   */
  threshold?: number;
  /**
   * Shapes not judged: a RegExp tested against the fingerprint, a shape id (12 hex characters), or a whole
   * fingerprint. They are listed as ignored in the message, never dropped silently.
   */
  ignore?: readonly (RegExp | string)[];
}

export const DEFAULT_REPEAT_THRESHOLD = 2;
// Context, not evidence: the shapes that passed are cut short; offenders and ignored shapes are always all listed.
const BELOW_SHOWN = 20;

/** Why a shape ran more than once, from its distinct parameter sets. */
export type RepeatKind = 'N+1' | 'N+1 with duplicates' | 'duplicate' | 'repeated';

export interface RepeatedShape {
  shape: ShapeStat;
  kind: RepeatKind;
  /** One line: `N+1 (different parameters each time): 20 calls of ...`. */
  description: string;
}

export interface IgnoredShape {
  shape: ShapeStat;
  /** `marked ignored by the capture`, or the ignore entry that matched. */
  why: string;
}

export type RepeatedShapesJudgement =
  { ok: true; threshold: number; repeated: RepeatedShape[]; ignored: IgnoredShape[]; judged: ShapeStat[] } | { ok: false; reason: string };

type IgnoreEntry = { test(shape: ShapeStat): boolean; label: string };

function describeEntry(entry: unknown): string {
  if (typeof entry === 'string') return JSON.stringify(entry);
  if (entry === null) return 'null';
  return `${String(entry)} (${typeof entry})`;
}

function parseOptions(options: unknown): { threshold: number; ignore: IgnoreEntry[] } | string {
  if (options === undefined) return { threshold: DEFAULT_REPEAT_THRESHOLD, ignore: [] };
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    return `options must be an object { threshold?, ignore? }, received ${describeEntry(options)}`;
  }
  const { threshold = DEFAULT_REPEAT_THRESHOLD, ignore = [], ...rest } = options as Record<string, unknown>;
  const unknownKeys = Object.keys(rest);
  if (unknownKeys.length > 0) return `unknown option${unknownKeys.length > 1 ? 's' : ''} ${unknownKeys.join(', ')}: the options are threshold and ignore`;
  if (typeof threshold !== 'number' || !Number.isInteger(threshold) || threshold < 2) {
    return `threshold must be an integer of at least 2 (a shape that ran that many times fails), received ${describeEntry(threshold)}`;
  }
  if (!Array.isArray(ignore)) return `ignore must be an array of RegExp, shape ids or fingerprints, received ${describeEntry(ignore)}`;
  const entries: IgnoreEntry[] = [];
  for (const [i, entry] of ignore.entries()) {
    if (entry instanceof RegExp) {
      // `search` ignores lastIndex, so a /g or /y pattern does not alternate between matching and not.
      entries.push({ test: (s) => s.fingerprint.search(entry) >= 0, label: `ignore[${i}] ${String(entry)}` });
    } else if (typeof entry === 'string' && entry.length > 0) {
      entries.push(
        isFingerprintId(entry)
          ? { test: (s) => s.id === entry, label: `ignore[${i}] id ${entry}` }
          : { test: (s) => s.fingerprint === entry, label: `ignore[${i}] fingerprint` },
      );
    } else {
      return `ignore[${i}] is ${describeEntry(entry)}: each entry must be a RegExp (tested against the fingerprint), a shape id (12 hex characters) or a whole fingerprint`;
    }
  }
  return { threshold, ignore: entries };
}

function repeatKind(shape: ShapeStat): { kind: RepeatKind; why: string } {
  const distinct = shape.distinctParameterSets;
  const sets = shape.parameterSets;
  if (distinct === null) return { kind: 'repeated', why: 'parameters not tracked' };
  // Compared over the first calls only when there were many (ShapeStat.distinctOf).
  const of = Math.min(shape.distinctOf ?? sets, sets);
  const among = of < sets ? ` (values compared over the first ${of} of ${sets})` : '';
  if (distinct <= 1) return { kind: 'duplicate', why: sets > 0 ? `the same parameters every time${among}` : 'no parameters, the same statement every time' };
  if (distinct >= of) return { kind: 'N+1', why: `different parameters each time${among}` };
  return { kind: 'N+1 with duplicates', why: `${distinct} distinct of ${sets} parameter sets${among}` };
}

function shapesOf(tally: Tally): ShapeStat[] | string {
  const driver = tally.layers.driver as DriverLayerWithShapes | null;
  if (!driver) return 'the driver layer was not captured';
  if (driver.shapes === undefined) return 'this driver layer records no statement shapes';
  const parsed = ShapeStatsSchema.safeParse(driver.shapes);
  if (!parsed.success) return `the driver layer's shapes do not parse: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
  return parsed.data;
}

/** Judges a tally's shapes; the matcher only words the result. */
export function judgeRepeatedShapes(tally: Tally, options?: unknown): RepeatedShapesJudgement {
  const parsed = parseOptions(options);
  if (typeof parsed === 'string') return { ok: false, reason: parsed };
  const shapes = shapesOf(tally);
  if (typeof shapes === 'string') return { ok: false, reason: shapes };
  const repeated: RepeatedShape[] = [];
  const ignored: IgnoredShape[] = [];
  const judged: ShapeStat[] = [];
  for (const shape of shapes) {
    if (shape.ignored) {
      ignored.push({ shape, why: 'marked ignored by the capture' });
      continue;
    }
    const entry = parsed.ignore.find((e) => e.test(shape));
    if (entry) {
      ignored.push({ shape, why: `matched ${entry.label}` });
      continue;
    }
    judged.push(shape);
    if (shape.calls < parsed.threshold) continue;
    const { kind, why } = repeatKind(shape);
    repeated.push({
      shape,
      kind,
      description: `${kind} (${why}): ${shape.calls} calls of ${shape.id} [${shape.statementClass}/${shape.kind}] ${shape.fingerprint}`,
    });
  }
  repeated.sort((a, b) => b.shape.calls - a.shape.calls);
  return { ok: true, threshold: parsed.threshold, repeated, ignored, judged };
}

/** The lines under a message: each repeated shape with its caller, then what was ignored. */
export function describeRepeatedShapes(judgement: Extract<RepeatedShapesJudgement, { ok: true }>): string {
  const lines: string[] = [];
  for (const r of judgement.repeated) {
    lines.push(`  ✗ ${r.description}`);
    // Not "at file:line": Jest and Vitest take such a line for a stack frame of their own and rewrite it.
    lines.push(`      called from ${r.shape.caller ?? '(caller unknown: no frame outside sqltally and node_modules)'}`);
  }
  const below = judgement.judged.filter((s) => s.calls < judgement.threshold);
  if (below.length > 0) {
    lines.push(`  below the threshold (${below.length}):`);
    for (const s of below.slice(0, BELOW_SHOWN)) lines.push(`    ${s.calls}× ${s.id} [${s.statementClass}/${s.kind}] ${s.fingerprint}`);
    if (below.length > BELOW_SHOWN) lines.push(`    ... and ${below.length - BELOW_SHOWN} more`);
  }
  if (judgement.ignored.length > 0) {
    lines.push(`  ignored (${judgement.ignored.length}):`);
    for (const i of judgement.ignored)
      lines.push(`    ${i.shape.calls}× ${i.shape.id} [${i.shape.statementClass}/${i.shape.kind}] ${i.shape.fingerprint} (${i.why})`);
  }
  return lines.join('\n');
}
