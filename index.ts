/**
 * sqltally's public API. The folders follow the data: a backend starts (containers/), the driver is wrapped and
 * the wire and server are read (counters/), a verdict is decided (verdict/), a window is captured (capture/), and
 * the report is written and gated (reports/, run/).
 */
export { capture, CaptureSession } from './capture/capture';
export type { CaptureOptions, Captured, IgnoreEntry, MeasureOptions, OpenCapture, SessionConnection, TimeOptions, UninstrumentedTimes } from './capture/capture';
export type { Tally, Layers, WorkloadError, IgnoredShare, CountedDriver } from './capture/tally';
export { windowPerTest } from './jest/window';
export type { TestHooks, TestWindows, WindowPerTestOptions } from './jest/window';
export { createSqltallyMatchers, installSqltallyMatchers, sqltallyMatchers } from './jest/matchers';
export type { SqltallyMatchers } from './jest/matchers';
export type { RepeatedShapesOptions } from './jest/repeated-shapes';
export { fingerprint, fingerprintId } from './counters/fingerprint';
export { captureCaller } from './counters/caller';
export { ShapeStatSchema } from './counters/shapes';
export type { ShapeStat } from './counters/shapes';
export { checkCounts } from './jest/expectations';
export type { CountSpec, CountCheck } from './jest/expectations';
export { listBackends, resolveBackend, startBackend } from './containers/registry';
export { SqltallyError, redactSecrets } from './containers/errors';
export type * from './containers/types';
export type { StatementEvent, DriverLayer, StatementClass, CallKind } from './counters/events';
export type { WireCounts } from './counters/wire/types';
export type { ServerLayer, ServerSummary } from './counters/probes/types';
export type { Verdict, VerdictKind } from './verdict/types';
export { runMatrix } from './run/matrix';
export type { RunPlan } from './run/matrix';
export { readReportFile, readBaselineFile } from './reports/schema';
export type { Report, Cell, Baseline } from './reports/schema';
export { compareWithBaseline } from './reports/gate';
