import type { BackendName, Capabilities } from '../../backends/types';
import type { DriverName } from '../../shared/driver-names';
import type { CallKind, StatementClass } from '../../sql/events';
import type { DriverHandle } from '../../driver/registry';
import type { Row } from '../rows';
import type { WorkloadTable } from '../table';

/**
 * The object a strategy's `run` is handed: the raw connection its driver module opens. A counting proxy over one
 * (src/driver/) has the same type and behaves the same, so strategies use only public driver methods.
 */
export type { DriverHandle } from '../../driver/registry';

/** Knobs a run may turn; each is validated by `plan` before anything is sent. */
export interface PlanOptions {
  /** Most bind values per statement for the bound multi-row paths; default 30000. Checked on every strategy. */
  bindBudget?: number;
  /** Rows per statement for the text paths; default `TEXT_ROWS_PER_STATEMENT` (10000). */
  textRowsPerStatement?: number;
  /** Rows per COPY / LOAD DATA statement for the bulk paths; default all rows in one statement. */
  bulkRowsPerStatement?: number;
  /** Names the backend in errors and picks its protocol limit; defaults to the strategy's first backend. */
  backend?: BackendName | string;
}

/** What a strategy will send, decided from the row count and the server's capabilities alone. */
export interface InsertPlan {
  strategy: string;
  backend: BackendName;
  rows: number;
  /** Rows carried by each INSERT execution, in order (all 1 for the one-row-per-call strategies). */
  statementRows: number[];
  /** The bind-value budget asked for (validated even where a strategy binds nothing). */
  bindBudget: number;
  /** The ceiling the budget was checked against: min(protocol limit, server-reported limit). */
  bindLimit: number;
  textRowsPerStatement: number;
}

/** One statement text and the parameter sets it is sent with; what they mean is up to the strategy. */
export interface PreparedStep {
  sql: string;
  params: readonly (readonly unknown[])[];
  /** Rows this step inserts. */
  rows: number;
}

/** Everything `run` needs, built by `prepare` outside the timed part: SQL strings, value arrays, literals. */
export interface PreparedInput {
  strategy: string;
  table: WorkloadTable;
  rows: number;
  steps: readonly PreparedStep[];
}

/** One driver call the strategy makes, as the driver layer should record it. */
export interface ExpectedCall {
  method: string;
  kind: CallKind;
  statementClass: StatementClass;
  bindValues: number;
  parameterSets: number;
}

/** Driver-layer totals a correct counting proxy must report for one run of a strategy. */
export interface ExpectedDriverCounts {
  calls: number;
  parameterSets: number;
  /** One entry per call, in call order (BEGIN/COMMIT and prepares included, with 0). */
  bindValuesPerCall: number[];
  byKind: Partial<Record<CallKind, number>>;
  byClass: Partial<Record<StatementClass, number>>;
  /** The calls one by one, for a failure message that shows where the counts part ways. */
  sequence: ExpectedCall[];
  /**
   * Wire commands the plan fixes exactly where the driver call cannot say (a COPY's CopyData messages, a LOAD DATA's
   * data packets: one per chunk the strategy writes), checked against the wire layer.
   */
  wire?: Record<string, number>;
}

/**
 * One way of inserting N rows, addressable by `name` in reports (`mysql2.execute-multirow`). `plan` and
 * `prepare` do all checking and building before the timed `run`; `run` only talks to the driver.
 */
export interface InsertStrategy<D extends DriverName> {
  /** Stable `<driver>.<how>` name; reports and baselines key on it. */
  readonly name: string;
  readonly driver: D;
  readonly backends: readonly BackendName[];
  /** One line for humans: what is sent and how it is chunked. */
  readonly summary: string;
  /** Options the connection must be opened with (mariadb `{ bulk: false }`). */
  readonly connectionOptions?: Readonly<Record<string, unknown>>;
  /** Validates rows, budget and limits; throws a config SqltallyError before anything is sent. */
  plan(rows: number, caps: Pick<Capabilities, 'maxBindValues'>, options?: PlanOptions): InsertPlan;
  /** Checks every row and builds SQL and values; throws a workload SqltallyError on a row the driver cannot bind. */
  prepare(rows: readonly Row[], table: WorkloadTable, plan: InsertPlan): PreparedInput;
  /** The timed part. */
  run(handle: DriverHandle<D>, input: PreparedInput): Promise<void>;
  /** Driver calls `run` makes for this plan, derived from the same plan. */
  expectedDriverCounts(rows: number, caps: Pick<Capabilities, 'maxBindValues'>, options?: PlanOptions): ExpectedDriverCounts;
}

/** Any strategy, whatever its driver. */
export type AnyInsertStrategy = { [D in DriverName]: InsertStrategy<D> }[DriverName];
