import type { Database } from 'better-sqlite3';

/**
 * A small order service on SQLite: the kind of data access code a statement budget guards. `linesOfRecentOrders`
 * is the classic N+1 (one query for the orders, then one per order for its lines); `linesOfRecentOrdersFixed` asks
 * once.
 */

export interface Order {
  id: number;
  customer: string;
  lines: { sku: string; quantity: number }[];
}

export function createSchema(db: Database): void {
  db.exec(`
    DROP TABLE IF EXISTS order_lines;
    DROP TABLE IF EXISTS orders;
    CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL);
    CREATE TABLE order_lines (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id), sku TEXT NOT NULL, quantity INTEGER NOT NULL);
  `);
}

export function seed(db: Database, orders: number, linesPerOrder: number): void {
  const order = db.prepare('INSERT INTO orders (id, customer) VALUES (?, ?)');
  const line = db.prepare('INSERT INTO order_lines (order_id, sku, quantity) VALUES (?, ?, ?)');
  db.transaction(() => {
    for (let o = 1; o <= orders; o++) {
      order.run(o, `customer-${o}`);
      for (let l = 0; l < linesPerOrder; l++) line.run(o, `sku-${o}-${l}`, l + 1);
    }
  })();
}

/** The 20 most recent orders with their lines, one query per order: 21 statements. */
export function linesOfRecentOrders(db: Database): Order[] {
  const orders = db.prepare('SELECT id, customer FROM orders ORDER BY id DESC LIMIT 20').all() as { id: number; customer: string }[];
  return orders.map((o) => ({
    ...o,
    lines: db.prepare('SELECT sku, quantity FROM order_lines WHERE order_id = ? ORDER BY id').all(o.id) as Order['lines'],
  }));
}

/** The same answer in two statements: the orders, then every line of those orders at once. */
export function linesOfRecentOrdersFixed(db: Database): Order[] {
  const orders = db.prepare('SELECT id, customer FROM orders ORDER BY id DESC LIMIT 20').all() as { id: number; customer: string }[];
  const ids = orders.map((o) => o.id);
  const lines = db.prepare(`SELECT order_id, sku, quantity FROM order_lines WHERE order_id IN (${ids.map(() => '?').join(', ')}) ORDER BY id`).all(...ids) as {
    order_id: number;
    sku: string;
    quantity: number;
  }[];
  return orders.map((o) => ({ ...o, lines: lines.filter((l) => l.order_id === o.id).map(({ sku, quantity }) => ({ sku, quantity })) }));
}
