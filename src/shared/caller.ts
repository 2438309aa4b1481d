import { isAbsolute, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorClass, isArray } from './intrinsics';

/**
 * Where sqltally's own code lives, from this file's location, so the answer is right from the TypeScript sources
 * (ts-jest, tsx, Vitest), from the compiled `dist/` and from an installed package.
 *
 * - Compiled (`dist/shared/caller.js`): everything under `dist/` is sqltally's, and so is the package's `bin/`.
 *   An installed copy sits under `node_modules/` as well, which is skipped anyway.
 * - Sources (`src/shared/caller.ts`): the library folders are sqltally's, but not the test files in them, nor
 *   `integration/` and `bench/`: those are callers, like a user's tests.
 */
export interface OwnCode {
  roots: string[];
  /** Files under `roots` that are callers all the same (test files in a source checkout). */
  callers: RegExp | null;
}

const TEST_FILE = /\.(?:test|spec)\.[cm]?[jt]sx?$/;
// Deep enough for an ORM between the user's line and the driver (typeorm, sequelize: 20 to 30 frames).
const FRAMES_KEPT = 60;
// Frames looked at first: the driver wrapper and the window's bookkeeping are a handful, so the user's frame is
// nearly always among them; a stack's cost grows with its frames, so the deep look is only taken when needed.
const FRAMES_FIRST = 12;
/** Paths whose depth is remembered; beyond that a new path starts from FRAMES_FIRST each time. */
const DEPTHS_MAX = 1024;

/**
 * How many frames to take first for a named path (a driver's method): where its user frame was found, since every frame
 * walked costs and a path's frames repeat from call to call. A deeper depth found later replaces it, a shallower never.
 */
const firstDepths = new Map<string, number>();

function rememberDepth(path: string, index: number): void {
  const known = firstDepths.get(path);
  if (known !== undefined && known >= index + 1) return;
  if (known === undefined && firstDepths.size >= DEPTHS_MAX) return;
  firstDepths.set(path, index + 1);
}

/** Where sqltally's own code is, given the path of this module (exported for tests of both layouts). */
export function ownCodeOf(here: string | null): OwnCode {
  if (here === null) return { roots: [], callers: null };
  const folder = resolve(here, '..');
  // src/ in a checkout, dist/ in the package; test files inside src/ call sqltally like a user's would.
  const root = resolve(folder, '..');
  return { roots: [root + sep, resolve(root, '..', 'bin') + sep], callers: /\.[cm]?js$/.test(here) ? null : TEST_FILE };
}

// `__filename` is what CommonJS (tsc, ts-jest, tsx) gives; an ESM runner may not, and then the first frame of a
// stack taken here names this file.
function thisFile(): string | null {
  if (typeof __filename === 'string' && isAbsolute(__filename)) return __filename;
  return locationOf(new Error().stack?.split('\n')[1] ?? '')?.file ?? null;
}

const OWN = ownCodeOf(thisFile());

interface Location {
  file: string;
  line: string;
  column: string;
}

// `at /a/b.ts:1:2` (an anonymous function), `at fn (/a/b.ts:1:2)`, `at async fn (file:///a/b.mjs:1:2)`; eval
// and native frames end in `<anonymous>:1:1` or `(native)` and give no file.
const BARE_FRAME = /^\s*at (?:async )?([^()\s][^()]*):(\d+):(\d+)\s*$/;
const NAMED_FRAME = /\(([^()]+):(\d+):(\d+)\)\s*$/;

function locationOf(frame: string): Location | null {
  const m = BARE_FRAME.exec(frame) ?? NAMED_FRAME.exec(frame);
  if (!m) return null;
  let file = m[1]!;
  if (file.startsWith('file://')) {
    try {
      file = fileURLToPath(file);
    } catch {
      return null;
    }
  }
  if (!isAbsolute(file)) return null;
  return { file, line: m[2]!, column: m[3]! };
}

/** True for a frame's file that is not the user's: a package under `node_modules`, or sqltally itself. */
export function isLibraryFile(file: string, own: OwnCode = OWN): boolean {
  if (file.includes(`${sep}node_modules${sep}`)) return true;
  if (!own.roots.some((root) => (root.endsWith(sep) ? file.startsWith(root) : file === root))) return false;
  return !(own.callers?.test(file) ?? false);
}

/** The part of V8's CallSite that is read here. */
interface CallSite {
  getFileName(): string | null | undefined;
  getLineNumber(): number | null;
  getColumnNumber(): number | null;
}

/**
 * Callers already printed, by the user frame's position in the running code: mapping through source maps is most of a
 * capture's cost and a position always maps to the same line. Bounded like the statement caches (starts over when full).
 */
const PRINTED_MAX = 4096;
const printed = new Map<string, string | null>();

function relativeLocation(file: string, line: string | number, column: string | number): string {
  const rel = relative(process.cwd(), file);
  const shown = rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
  return `${shown}:${line}:${column}`;
}

function fileOf(site: CallSite): string | null {
  const name = site.getFileName();
  if (!name) return null;
  if (name.startsWith('file://')) {
    try {
      return fileURLToPath(name);
    } catch {
      return null;
    }
  }
  return isAbsolute(name) ? name : null;
}

/** Hands V8's CallSites back as they are: the stack as objects, with no formatting. */
const AS_SITES = (_error: Error, sites: NodeJS.CallSite[]): unknown => sites;

/**
 * The user's line that led to the current driver call: `file:line:column` of the first frame outside `node_modules`
 * and sqltally, relative to the working directory, as the runtime prints it (source-mapped under ts-jest or tsx); null
 * when the stack holds none. A stack trace is dear: call it once per new statement shape. `path` (a driver method)
 * looks first at the depth the user's frame was found at last time on that path.
 */
export function captureCaller(path?: string): string | null {
  // First the frames as objects, which costs no formatting, to find which one is the user's.
  const environment = ErrorClass.prepareStackTrace;
  const limit = ErrorClass.stackTraceLimit;
  try {
    ErrorClass.prepareStackTrace = AS_SITES;
    const first = (path === undefined ? undefined : firstDepths.get(path)) ?? FRAMES_FIRST;
    let sites = structuredSites(first);
    let index = isArray(sites) ? userFrameIndex(sites) : -1;
    if (index < 0 && isArray(sites) && sites.length >= first) {
      sites = structuredSites(FRAMES_KEPT);
      index = isArray(sites) ? userFrameIndex(sites) : -1;
    }
    if (path !== undefined && index >= 0) rememberDepth(path, index);
    if (!isArray(sites)) {
      // A runtime that ignores prepareStackTrace: read the printed stack instead.
      ErrorClass.prepareStackTrace = environment;
      return fromText(captureText(FRAMES_KEPT));
    }
    if (index < 0) return null;
    const site = sites[index] as CallSite;
    const position = `${site.getFileName() ?? ''}:${site.getLineNumber() ?? ''}:${site.getColumnNumber() ?? ''}`;
    const known = printed.get(position);
    if (known !== undefined) return known;
    // CallSites give the running code's positions; source maps (Jest's, or Node's under tsx) apply only when a stack is
    // printed, where this realm may not see them: so print the frames up to the user's the ordinary way, and no more.
    ErrorClass.prepareStackTrace = environment;
    const caller = fromText(captureText(index + 1), true);
    if (printed.size >= PRINTED_MAX) printed.clear();
    printed.set(position, caller);
    return caller;
  } finally {
    ErrorClass.prepareStackTrace = environment;
    ErrorClass.stackTraceLimit = limit;
  }
}

/** This stack as CallSites (prepareStackTrace set by the caller), cut at captureCaller; not an array if ignored. */
function structuredSites(frames: number): unknown {
  const holder: { stack?: unknown } = {};
  ErrorClass.stackTraceLimit = frames;
  ErrorClass.captureStackTrace(holder, captureCaller);
  return holder.stack;
}

function userFrameIndex(sites: readonly CallSite[]): number {
  return sites.findIndex((site) => {
    const file = fileOf(site);
    return file !== null && !isLibraryFile(file);
  });
}

function captureText(frames: number): string {
  const holder: { stack?: string } = {};
  ErrorClass.stackTraceLimit = frames;
  // Cut at captureCaller, like the first capture, so frame `frames - 1` is the same frame in both.
  ErrorClass.captureStackTrace(holder, captureCaller);
  return typeof holder.stack === 'string' ? holder.stack : '';
}

/** The first user frame of a printed stack; with `last`, the last frame printed (known to be the user's). */
function fromText(stack: string, last = false): string | null {
  const frames = stack.split('\n').filter((frame) => frame.trimStart().startsWith('at '));
  if (last) frames.reverse();
  for (const frame of frames) {
    const location = locationOf(frame);
    if (location === null) continue;
    if (!last && isLibraryFile(location.file)) continue;
    return relativeLocation(location.file, location.line, location.column);
  }
  return null;
}
