import fs from 'node:fs';
import { describeEachBackend, integrationBackends, withBackend } from './harness';

/**
 * The harness's promise: a describeEachBackend block's afterAll hooks run while its server is up, even declared after
 * withBackend. SQLite stands in for every provider: its "server" is a folder that stopping removes, a cheap check.
 */

const seenAtTeardown: string[] = [];

describeEachBackend(
  (b) => {
    const backend = withBackend(b.id, { fresh: true });
    afterAll(() => {
      seenAtTeardown.push(`${b.id}: ${fs.existsSync(backend().dataDir ?? '/nonexistent') ? 'server up' : 'server already stopped'}`);
    });
    it('the server is up inside the block', () => {
      expect(fs.existsSync(backend().dataDir ?? '/nonexistent')).toBe(true);
    });
  },
  (b) => b.backend === 'sqlite',
);

const sqlite = integrationBackends().filter((b) => b.backend === 'sqlite' && b.available);

describe('after the block', () => {
  if (sqlite.length === 0) {
    it.skip(`no SQLite in this run (SQLTALLY_BACKENDS=${process.env['SQLTALLY_BACKENDS'] ?? ''}): nothing to check`, () => undefined);
    return;
  }
  it("an afterAll declared after withBackend ran while the block's server was still up", () => {
    expect(seenAtTeardown).toEqual(sqlite.map((b) => `${b.id}: server up`));
  });
});
