// SQLite has no server to freeze: its variants show as visible skips (see freeze.cases.ts).
import fs from 'node:fs';
import { BACKEND_NAMES } from '../../src/backends/types';
import { freezeCases } from './freeze.cases';

freezeCases('sqlite');

it('every backend has its freeze.<backend>.test.ts, so none goes untested when one is added', () => {
  const files = fs.readdirSync(__dirname).filter((f) => /^freeze\..+\.test\.ts$/.test(f));
  expect(files.sort()).toEqual(BACKEND_NAMES.map((n) => `freeze.${n}.test.ts`).sort());
});
