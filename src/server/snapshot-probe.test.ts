import type { BackendDescription } from '../backends/types';
import type { WindowContext } from './probe';
import { DEPARTURE_WAIT_MS, SnapshotProbe, type PreparedInstance, type Snapshot, type SnapshotSource, type WindowExtras } from './snapshot-probe';
import type { ServerSummary } from './types';
import type { Counters } from './window';

const DESCRIPTION: BackendDescription = {
  name: 'mariadb',
  id: 'mariadb@10.11',
  flavour: 'mariadb',
  serverVersion: '10.11.19-MariaDB',
  provider: 'local',
  origin: '/usr/sbin/mariadbd',
  capabilities: {
    wireProtocol: 'mysql',
    perThreadStatements: true,
    statementStats: false,
    rowCounter: 'Handler_write',
    bulkExecute: true,
    maxBindValues: 65535,
    privateServer: true,
  },
  readyMs: 1,
};

const CTX: WindowContext = { workloadConnectionIds: [7], table: { name: 't' } };

/**
 * A server whose global Questions grow by the probe's own cost (4) at every snapshot, plus whatever the test
 * makes "happen" between snapshots.
 */
class ScriptedSource implements SnapshotSource {
  readonly description = DESCRIPTION;
  readonly comparable = [{ global: 'Questions', perConnection: 'Questions' }];
  readonly attributionMethod = 'performance_schema' as const;
  readonly degraded: string[] = [];
  readonly connectionsKey = null;
  questions = 100;
  workloadQuestions = 0;
  costPerSnapshot = 4;
  /** Extra cost added at a given snapshot index, to make calibration unstable. */
  jitterAt = new Map<number, number>();
  snapshots = 0;
  failures: string[] = [];
  attributed = [7];
  /** Other sessions the server lists, each until its snapshot index `until` (inclusive). */
  listed: { id: number; until: number }[] = [];

  async open(): Promise<void> {}
  async close(): Promise<void> {}

  /** Something happening on the server between two snapshots. */
  happen(global: number, workload: number): void {
    this.questions += global;
    this.workloadQuestions += workload;
  }

  async snapshot(_ctx: WindowContext, _purpose: string, ids: readonly number[]): Promise<Snapshot> {
    this.questions += this.costPerSnapshot + (this.jitterAt.get(this.snapshots) ?? 0);
    this.snapshots += 1;
    return {
      global: { Questions: this.questions },
      // Each connection the server knows has its own counters; the scripted workload runs on the first one.
      perConnection: new Map(ids.filter((id) => this.attributed.includes(id)).map((id, i) => [id, { Questions: i === 0 ? this.workloadQuestions : 0 }])),
      statements: null,
      sessions: {
        foreign: this.listed.filter((l) => this.snapshots <= l.until).map((l) => ({ id: l.id, user: 'root', host: '127.0.0.1', command: 'idle', info: null })),
        background: [],
        canSeeOtherSessions: true,
      },
      notes: [],
      failures: this.failures,
    };
  }

  summarize(
    global: Counters,
    perConnection: Counters | null,
    _extras: WindowExtras,
  ): { summary: ServerSummary; source: 'perConnection' | 'global'; notes: string[] } {
    const q = perConnection ? perConnection.Questions : global.Questions;
    return {
      summary: { statements: q ?? null, inserts: null, prepares: null, executes: null, bulkExecutes: null, commits: null, rowsInserted: null },
      source: perConnection ? 'perConnection' : 'global',
      notes: [],
    };
  }
}

describe('SnapshotProbe', () => {
  it('measures the cost from empty windows and reports it', async () => {
    const source = new ScriptedSource();
    const probe = new SnapshotProbe(source, { calibrationPairs: 3 });
    const cost = await probe.calibrate(CTX);
    expect(cost).toEqual({ counters: { Questions: 4 }, perConnection: { Questions: 0 }, pairs: 3, stable: true, unstable: {} });
    expect(source.snapshots).toBe(5);
  });

  it('gives control 0 and the exact window when nothing else talks', async () => {
    const source = new ScriptedSource();
    const probe = new SnapshotProbe(source);
    const win = await probe.begin(CTX);
    source.happen(3, 3);
    const layer = await win.end();
    // Only what moved is listed: a clean control is empty.
    expect(layer.control).toEqual({});
    expect(layer.global).toEqual({ Questions: 3 });
    expect(layer.perConnection).toEqual({ Questions: 3 });
    expect(layer.probeCost).toEqual({ Questions: 4 });
    expect(layer.incomplete).toBe(false);
    expect(layer.attribution).toEqual({ method: 'performance_schema', requested: [7], found: [7], exact: true, missing: [] });
  });

  it('shows a control residue when another client talks during the control window', async () => {
    const source = new ScriptedSource();
    const probe = new SnapshotProbe(source);
    await probe.calibrate(CTX);
    // The intruder's statement lands between the control window's two snapshots.
    const realSnapshot = source.snapshot.bind(source);
    let calls = 0;
    source.snapshot = async (...args) => {
      calls += 1;
      if (calls === 2) source.happen(2, 0);
      return realSnapshot(...args);
    };
    const layer = await (await probe.begin(CTX)).end();
    expect(layer.control.Questions).toBe(2);
    expect(layer.notes).toContain('control window moved: Questions +2');
  });

  it('is incomplete when the cost is not stable', async () => {
    const source = new ScriptedSource();
    source.jitterAt.set(3, 1);
    const probe = new SnapshotProbe(source, { calibrationPairs: 3 });
    const cost = await probe.calibrate(CTX);
    expect(cost.stable).toBe(false);
    const layer = await (await probe.begin(CTX)).end();
    expect(layer.incomplete).toBe(true);
    expect(layer.incompleteReasons[0]).toMatch(/probe cost was not stable over 3 empty windows \(Questions: 4\/5\/4\)/);
  });

  it('is incomplete when a read failed, never a silent 0', async () => {
    const source = new ScriptedSource();
    const probe = new SnapshotProbe(source);
    await probe.calibrate(CTX);
    source.failures = ['performance_schema read failed: SELECT command denied'];
    const layer = await (await probe.begin(CTX)).end();
    expect(layer.incomplete).toBe(true);
    expect(layer.incompleteReasons).toEqual(['performance_schema read failed: SELECT command denied']);
  });

  it('marks attribution inexact when a workload connection was not found', async () => {
    const source = new ScriptedSource();
    source.attributed = [];
    const probe = new SnapshotProbe(source);
    const layer = await (await probe.begin({ ...CTX, workloadConnectionIds: [7, 8] })).end();
    expect(layer.attribution).toMatchObject({ method: 'performance_schema', requested: [7, 8], found: [], exact: false });
    expect(layer.attribution?.missing).toEqual(['#7 was not found at the start of the window', '#8 was not found at the start of the window']);
  });
});

/**
 * A PostgreSQL-like source: pg_stat_statements grows by the workload's statements and each window connection's settle
 * statement, which a pool connecting inside the window moves for the first time there.
 */
class StatementsSource extends ScriptedSource {
  readonly ownStatements = ['SELECT pg_stat_force_next_flush()'];
  calls = new Map<string, { query: string; calls: number }>([['probe', { query: 'SELECT json_build_object(...)', calls: 0 }]]);
  connections = 0;

  bump(key: string, query: string, by: number): void {
    const s = this.calls.get(key) ?? { query, calls: 0 };
    s.calls += by;
    this.calls.set(key, s);
  }

  override async snapshot(ctx: WindowContext, purpose: string, ids: readonly number[]): Promise<Snapshot> {
    const snap = await super.snapshot(ctx, purpose, ids);
    if (this.connections > 0) this.bump('settle', 'SELECT pg_stat_force_next_flush()', this.connections);
    this.bump('probe', 'SELECT json_build_object(...)', 1);
    return { ...snap, statements: new Map([...this.calls].map(([k, s]) => [k, { ...s, rows: 0, statementClass: classOf(s.query) }])) };
  }
}

function classOf(query: string): string {
  return query.startsWith('INSERT') ? 'insert' : 'select';
}

describe('SnapshotProbe, per-statement counters', () => {
  it("never counts the wire proxy's settle statement as the workload's, even when it first moves inside the window", async () => {
    const source = new StatementsSource();
    const probe = new SnapshotProbe(source);
    const win = await probe.begin(CTX);
    // A pool of 4 connects inside the window and inserts 24 rows one by one.
    source.connections = 4;
    source.bump('insert', 'INSERT INTO t (a) VALUES ($1)', 24);
    const layer = await win.end();
    expect(layer.global['statements.calls']).toBe(24);
    expect(layer.global['statements.insert_calls']).toBe(24);
    expect(layer.statements).toEqual([{ query: 'INSERT INTO t (a) VALUES ($1)', calls: 24, rows: 0 }]);
  });
});

/** A source whose closing-connection read can be held open, to order it against the end snapshot. */
class RetiringSource extends ScriptedSource {
  reads: number[] = [];
  /** Each read waits for this before returning. */
  gate: Promise<void> = Promise.resolve();
  readCostQuestions = 2;

  async readConnection(_ctx: WindowContext, connectionId: number): Promise<{ counters: Counters | null; prepared: Map<string, PreparedInstance> | null }> {
    await this.gate;
    this.reads.push(connectionId);
    // Reading costs the server statements of the probe's own, like the real per-thread queries.
    this.questions += this.readCostQuestions;
    return { counters: { Questions: this.workloadQuestions }, prepared: null };
  }
}

/**
 * A server that still lists a connection read at its close while tearing it down: its status already folded into
 * the server-wide counters (no Questions of its own any more), its prepared statements still there.
 */
class TearingSource extends RetiringSource {
  /** What the end snapshot shows for a connection that is being torn down, once set. */
  tearing: Counters | null = null;
  executes = 5;
  extras: WindowExtras | null = null;

  override async snapshot(ctx: WindowContext, purpose: string, ids: readonly number[]): Promise<Snapshot> {
    const snap = await super.snapshot(ctx, purpose, ids);
    const perConnection = this.tearing && snap.perConnection ? new Map([...snap.perConnection].map(([id]) => [id, this.tearing!])) : snap.perConnection;
    return { ...snap, perConnection, prepared: this.prepared() };
  }

  prepared(): Map<string, PreparedInstance> {
    return new Map([['7:140', { connectionId: 7, statementClass: 'insert', executes: this.executes }]]);
  }

  override async readConnection(ctx: WindowContext, connectionId: number): Promise<{ counters: Counters | null; prepared: Map<string, PreparedInstance> }> {
    const { counters } = await super.readConnection(ctx, connectionId);
    return { counters, prepared: this.prepared() };
  }

  override summarize(global: Counters, perConnection: Counters | null, extras: WindowExtras) {
    if (perConnection) this.extras = extras;
    return super.summarize(global, perConnection, extras);
  }
}

/** A calibrated probe's open window on `source`; reads by calibration (to learn a read's cost) are forgotten. */
async function windowOn(source: RetiringSource, ctx: WindowContext) {
  const probe = new SnapshotProbe(source);
  await probe.calibrate(ctx);
  const win = await probe.begin(ctx);
  source.reads = [];
  return win;
}

describe('SnapshotProbe, connections closing at the end of a window', () => {
  it('a connection read at its close counts with that reading, though the end snapshot still lists it half torn down', async () => {
    const source = new TearingSource();
    const probe = new SnapshotProbe(source);
    await probe.calibrate(CTX);
    const win = await probe.begin(CTX);
    // Three statements, three executes of a statement prepared before the window; then the connection quits.
    source.happen(3, 3);
    source.executes += 3;
    await win.retire(7, { quit: false });
    source.tearing = {};
    const layer = await win.end();
    expect({ perConnection: layer.perConnection, prepared: source.extras, exact: layer.attribution?.exact }).toEqual({
      perConnection: { Questions: 3 },
      prepared: { preparedExecutes: { insert: 3 }, preparedUnknown: null, droppedObjects: [] },
      exact: true,
    });
  });

  it('a read under way when end() is called finishes before the end snapshot, so its cost is inside the window', async () => {
    const source = new RetiringSource();
    const probe = new SnapshotProbe(source);
    await probe.calibrate(CTX);
    const win = await probe.begin(CTX);
    source.happen(3, 3);
    let open!: () => void;
    source.gate = new Promise<void>((resolve) => (open = resolve));
    const retiring = win.retire(7, { quit: false });
    const ending = win.end();
    // The end snapshot must not be taken while the read is held.
    await new Promise((r) => setImmediate(r));
    const snapshotsWhileHeld = source.snapshots;
    open();
    await retiring;
    const layer = await ending;
    expect(source.snapshots).toBe(snapshotsWhileHeld + 1);
    expect({ global: layer.global, perConnection: layer.perConnection, incomplete: layer.incompleteReasons }).toEqual({
      global: { Questions: 3 },
      perConnection: { Questions: 3 },
      incomplete: [],
    });
  });

  it('a connection that starts closing once the end has begun is not read again: the end snapshot has it', async () => {
    const source = new RetiringSource();
    const win = await windowOn(source, CTX);
    source.happen(3, 3);
    const ending = win.end();
    const late = win.retire(7, { quit: true });
    const layer = await ending;
    await late;
    expect(source.reads).toEqual([]);
    // Neither the read's cost nor a quit is taken out of counts that never had them.
    expect({ global: layer.global, perConnection: layer.perConnection }).toEqual({ global: { Questions: 3 }, perConnection: { Questions: 3 } });
    expect(await win.end()).toBe(layer);
  });

  /** A MySQL-like server whose COM_QUIT counts in Questions, and a connection that is gone once the window ends. */
  class QuittingSource extends RetiringSource {
    readonly quitCost = { Questions: 1 };
  }

  /** A window on a QuittingSource in which 3 statements and a COM_QUIT ran, and the server then forgot #7. */
  async function quitInWindow(ctx: WindowContext) {
    const source = new QuittingSource();
    const win = await windowOn(source, ctx);
    source.happen(4, 3);
    source.attributed = [];
    return { source, win };
  }

  it('a connection a passive capture saw gone: nothing is read, its quit is taken out, the server-wide counters are the layer', async () => {
    const { source, win } = await quitInWindow({ ...CTX, closingUnread: true });
    await win.retire(7, { quit: true, gone: true });
    const layer = await win.end();
    expect(source.reads).toEqual([]);
    expect({ global: layer.global, perConnection: layer.perConnection, attribution: layer.attribution, source: layer.summarySource }).toEqual({
      global: { Questions: 3 },
      perConnection: null,
      attribution: null,
      source: 'global',
    });
    expect(layer.summary.statements).toBe(3);
    expect(layer.notes.join('; ')).toMatch(
      /per-connection counters set aside, the server-wide ones used: #7 closed inside the window before its counters could be read \(the wire could not hold its goodbye\)/,
    );
  });

  it('the same close without closingUnread (the proxy, whose hold failed) leaves the attribution inexact, as before', async () => {
    const { win } = await quitInWindow(CTX);
    const layer = await win.end();
    expect(layer.attribution).toMatchObject({ exact: false, missing: ['#7 closed inside the window before its counters could be read'] });
    expect(layer.summarySource).toBe('perConnection');
  });

  describe('connections the workload closed before the window', () => {
    it('waits for one the server still lists to leave, so it is not taken for a client around the proxy', async () => {
      const source = new ScriptedSource();
      const probe = new SnapshotProbe(source);
      await probe.calibrate(CTX);
      const before = source.snapshots;
      // Still listed at the next three readings, as an exiting PostgreSQL backend is.
      source.listed.push({ id: 41, until: before + 3 });
      const win = await probe.begin({ ...CTX, departedConnectionIds: () => [41] });
      expect(source.snapshots - before).toBe(3 + 2);
      const layer = await win.end();
      expect(layer.foreignSessions).toEqual([]);
      expect(layer.control).toEqual({});
      expect(layer.notes.join('\n')).not.toMatch(/closed by the workload/);
    });

    it('does not wait for a session that is not one of them: another client is listed as it is, at once', async () => {
      const source = new ScriptedSource();
      const probe = new SnapshotProbe(source);
      await probe.calibrate(CTX);
      const before = source.snapshots;
      source.listed.push({ id: 99, until: Number.MAX_SAFE_INTEGER });
      const win = await probe.begin({ ...CTX, departedConnectionIds: () => [41] });
      expect(source.snapshots - before).toBe(2);
      const layer = await win.end();
      expect(layer.foreignSessions.map((f) => f.id)).toEqual([99]);
      // Whose it could be, in the layer: none of the connections sqltally closed, so not a leftover it waited for.
      expect(layer.notes).toContain(
        "other sessions listed: #99 not among the connections sqltally noted closing shortly before it; at the window's start #99, at its end #99 (sqltally's own then: the window's #7; closed before it #41; its probes are set aside by id)",
      );
    });

    it('gives up after DEPARTURE_WAIT_MS: the session stays foreign (never assert for it) and a note says whose it was', async () => {
      jest.useFakeTimers();
      try {
        const source = new ScriptedSource();
        const probe = new SnapshotProbe(source);
        await probe.calibrate(CTX);
        source.listed.push({ id: 41, until: Number.MAX_SAFE_INTEGER });
        const opening = probe.begin({ ...CTX, departedConnectionIds: () => [41] });
        await jest.advanceTimersByTimeAsync(DEPARTURE_WAIT_MS + 100);
        const win = await opening;
        const layer = await win.end();
        expect(layer.foreignSessions.map((f) => f.id)).toEqual([41]);
        expect(layer.notes.join('\n')).toMatch(/other sessions listed: #41 closed by sqltally shortly before the window; at the window's start #41/);
        expect(layer.notes).toContain(
          `connection(s) #41 closed before the window (by sqltally or through its proxy) were still on the server after ${DEPARTURE_WAIT_MS} ms`,
        );
      } finally {
        jest.useRealTimers();
      }
    });
  });
});
