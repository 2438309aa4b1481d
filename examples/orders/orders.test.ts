import Database from 'better-sqlite3';
import { CaptureSession } from '../../src/capture/capture';
import { installSqltallyMatchers } from '../../src/jest/matchers';
import { windowPerTest } from '../../src/jest/window';
import { createSchema, linesOfRecentOrders, linesOfRecentOrdersFixed, seed } from './app';

installSqltallyMatchers();

/**
 * The example the README points at: a statement budget on an order service. The N+1 version must fail the
 * repeated-shape budget, naming the shape, its count (20) and the line in app.ts; the fixed version passes it.
 */
let session: CaptureSession;
let raw: Database.Database;
let db: Database.Database;

beforeAll(async () => {
  session = await CaptureSession.open({ backend: 'sqlite' });
  const c = session.connection;
  if (c.kind !== 'file') throw new Error('SQLite gives a file');
  raw = new Database(c.filename);
  createSchema(raw);
  seed(raw, 50, 3);
  db = session.count(raw);
});
afterAll(async () => {
  raw?.close();
  await session?.close();
});

describe('the order service, one window per test', () => {
  const windows = windowPerTest(() => session);

  it('the N+1 version fails the repeated-shape budget with the shape, the count and the calling line', async () => {
    const orders = linesOfRecentOrders(db);
    expect(orders).toHaveLength(20);
    const tally = await windows.tally();
    expect(tally).toHaveVerdict('assert');
    let message = '';
    try {
      expect(tally).toHaveNoRepeatedShapes();
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/SELECT sku, quantity FROM order_lines WHERE order_id = \? ORDER BY id/);
    expect(message).toMatch(/\b20\b/);
    expect(message).toMatch(/called from examples\/orders\/app\.ts:\d+:\d+/);
    expect(message).toMatch(/N\+1/);
  });

  it('the fixed version asks twice and passes the budget', async () => {
    const orders = linesOfRecentOrdersFixed(db);
    expect(orders).toHaveLength(20);
    expect(orders[0]?.lines).toHaveLength(3);
    const tally = await windows.tally();
    expect(tally).toHaveNoRepeatedShapes();
    expect(tally).toHaveCounts({ driver: { byClass: { select: 2 } } });
  });
});

describe('a budget checked after every test', () => {
  // Every test of this describe must run each statement shape at most once.
  windowPerTest(() => session, { check: (t) => expect(t).toHaveNoRepeatedShapes() });

  it('passes for the fixed loader', () => {
    linesOfRecentOrdersFixed(db);
  });
});
