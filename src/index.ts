/**
 * sqltally's public API. The folders follow the data: a backend starts (backends/), the driver is wrapped
 * (driver/), the wire and the server are read (wire/, server/), a window is captured (capture/), a verdict is
 * decided (verdict/), and the report is written and gated (report/, run/).
 */
export { capture, CaptureSession } from './capture/capture';
export type { CaptureOptions, Captured, IgnoreEntry, MeasureOptions, OpenCapture, SessionConnection, TimeOptions, UninstrumentedTimes } from './capture/capture';
export type { Tally, Layers, WorkloadError, IgnoredShare, CountedDriver } from './capture/tally';
export { windowPerTest } from './jest/window';
export type { TestHooks, TestWindows, WindowPerTestOptions } from './jest/window';
export { createSqltallyMatchers, installSqltallyMatchers, sqltallyMatchers } from './jest/matchers';
export type { SqltallyMatchers } from './jest/matchers';
export type { RepeatedShapesOptions } from './jest/repeated-shapes';
export { fingerprint, fingerprintId } from './sql/fingerprint';
export { captureCaller } from './shared/caller';
export { ShapeStatSchema } from './sql/shapes';
export type { ShapeStat } from './sql/shapes';
export { checkCounts } from './jest/expectations';
export type { CountSpec, CountCheck } from './jest/expectations';
export { listBackends, resolveBackend, startBackend } from './backends/registry';
export { SqltallyError, redactSecrets } from './shared/errors';
export type * from './backends/types';
export type { StatementEvent, DriverLayer, StatementClass, CallKind } from './sql/events';
export type { WireCounts } from './wire/types';
export type { ServerLayer, ServerSummary } from './server/types';
export type { Verdict, VerdictKind } from './verdict/types';
export { runMatrix } from './run/matrix';
export type { RunPlan } from './run/matrix';
export { readReportFile, readBaselineFile } from './report/schema';
export type { Report, Cell, Baseline } from './report/schema';
export { compareWithBaseline } from './report/gate';
