/**
 * `sqltally`: the capture API (sessions, windows, tallies). The matchers are `sqltally/jest` and `sqltally/vitest`,
 * servers without a session `sqltally/backends`, the main job and its reports `sqltally/report`.
 * The folders follow the data: a backend starts (backends/), the driver is wrapped
 * (driver/), the wire and the server are read (wire/, server/), a window is captured (capture/), a verdict is
 * decided (verdict/), and the report is written and gated (report/, run/).
 */
export { capture, CaptureSession } from './capture/capture';
export type {
  CaptureOptions,
  Captured,
  ClientOptions,
  IgnoreEntry,
  MeasureOptions,
  OpenCapture,
  SessionConnection,
  TimeOptions,
  UninstrumentedTimes,
  WireCapture,
} from './capture/capture';
export type { Tally, Layers, WorkloadError, IgnoredShare, CountedDriver } from './capture/tally';
export { fingerprint, fingerprintId } from './sql/fingerprint';
export { captureCaller } from './shared/caller';
export type { ShapeStat } from './sql/shapes';
export { SqltallyError, redactSecrets } from './shared/errors';
export type { Phase, SqltallyErrorContext } from './shared/errors';
export type * from './backends/public-types';
export type { StatementEvent, DriverLayer, StatementClass, CallKind } from './sql/events';
export type { WireCounts } from './wire/types';
export type { ServerLayer, ServerSummary } from './server/types';
export type { Verdict, VerdictKind } from './verdict/types';
