/** `sqltally/report`: run the main job's matrix, read its report and baseline files, gate a report on a baseline. */
export { runMatrix } from './matrix';
export type { RunPlan } from './matrix';
export { readReportFile, readBaselineFile } from '../report/schema';
export type { Report, Cell, Baseline } from '../report/schema';
export { compareWithBaseline } from '../report/gate';
