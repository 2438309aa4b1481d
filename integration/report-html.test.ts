// @waits 20: a small main job on SQLite, then report.html in headless Chromium.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { main } from '../src/cli/main';
import { headline } from '../src/report/headline';
import { renderHtml } from '../src/report/html';
import { batchCell, fixtureReport } from '../src/report/report.fixture';
import { readReportFile, type Report } from '../src/report/schema';
import { formatMs } from '../src/report/timings';
import { CHROMIUM, CHROMIUM_ARGS } from './chromium';

/** Where the screenshot is kept for CI to attach; `test-artifacts/` is ignored by git. */
const ARTIFACTS = resolve(process.env['SQLTALLY_ARTIFACTS'] ?? 'test-artifacts');
const required = process.env['SQLTALLY_REQUIRE_CHROMIUM'] === '1';

if (!existsSync(CHROMIUM) && !required) {
  describe.skip(`report.html in Chromium: skipped: no browser at ${CHROMIUM} (apt-get install chromium, or set SQLTALLY_CHROMIUM; SQLTALLY_REQUIRE_CHROMIUM=1 makes this a failure)`, () => {
    it('needs Chromium', () => undefined);
  });
} else {
  describe('report.html in headless Chromium', () => {
    let dir: string;
    let report: Report;
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'sqltally-html-'));
      const out = join(dir, 'run');
      const code = await main(['run', '--backends', 'sqlite', '--rows', '100,300', '--hot-rows', '300', '--out', out]);
      expect(code).toBe(0);
      report = readReportFile(out);
      const { chromium } = await import('playwright-core');
      browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    });

    afterAll(async () => {
      await browser?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    beforeEach(async () => {
      page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      // The page must not reach anything: every request other than the file itself fails the test.
      page.on('request', (r) => {
        if (!r.url().startsWith('file://')) throw new Error(`report.html requested ${r.url()}`);
      });
    });
    afterEach(async () => page?.close());

    const open = async (file: string) => {
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(pathToFileURL(file).href);
      return errors;
    };

    it('shows the headline numbers of report.json, the count chart, and a cell reconciliation on click', async () => {
      const errors = await open(join(dir, 'run', 'report.html'));
      const expected = headline(report);
      expect(expected.length).toBe(1);
      const h = expected[0]!;
      const table = page.locator(`table.headline[data-backend="${h.backend}"]`);
      await table.waitFor();
      for (const r of h.strategies) {
        const row = table.locator(`tr[data-key="${r.key}"]`);
        expect(await row.locator('[data-field=driverCalls]').textContent()).toBe(String(r.driverCalls));
        expect(await row.locator('[data-field=p50]').textContent()).toBe(formatMs(r.p50Ns!));
      }
      expect(await page.locator('p.finding').first().textContent()).toBe(h.finding);
      expect(await page.locator('.chart svg').count()).toBe(1);

      const cells = page.locator('[data-testid=cells] tbody tr');
      expect(await cells.count()).toBe(report.cells.length);
      const first = report.cells[0]!;
      await page.locator(`[data-testid=cells] tr[data-key="${first.key}"]`).click();
      const details = page.locator('[data-testid=details]');
      expect(await details.locator('h3').textContent()).toBe(first.key);
      for (const line of first.verdict.reconciliation.slice(0, 3)) expect(await details.textContent()).toContain(line);

      await page.locator('[data-testid=filter]').fill('hot');
      const hot = report.cells.filter((c) => c.key.includes('hot')).length;
      expect(await page.locator('[data-testid=shown]').textContent()).toBe(`${hot} of ${report.cells.length} cells`);
      await page.locator('[data-testid=filter]').fill('');

      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'report-html.png'), fullPage: true });
      expect(errors).toEqual([]);
    });

    it('says what is wrong when the embedded report is damaged, and reads a report.json the reader opens', async () => {
      const html = readFileSync(join(dir, 'run', 'report.html'), 'utf8');
      const damaged = join(dir, 'damaged.html');
      writeFileSync(damaged, html.replace(/(<script type="application\/json" id="report-data">)([\s\S]{0,200})[\s\S]*?(<\/script>)/, '$1$2$3'));
      expect(await open(damaged)).toEqual([]);
      const problem = page.locator('[data-testid=problem]');
      expect(await problem.textContent()).toMatch(/is not valid JSON/);

      const corrupt = join(dir, 'corrupt.json');
      writeFileSync(corrupt, '{"kind":"baseline","schemaVersion":2,"cells":[{"key":1}]}');
      await page.locator('[data-testid=open-file]').setInputFiles(corrupt);
      await problem.filter({ hasText: 'corrupt.json is not a sqltally report' }).waitFor();
      expect(await problem.textContent()).toMatch(/kind is "baseline"/);
      expect(await problem.textContent()).toMatch(/cells\[0\]\.key is missing/);

      await page.locator('[data-testid=open-file]').setInputFiles(join(dir, 'run', 'report.json'));
      await page.locator('table.headline').first().waitFor();
    });

    it('shows a report with no cells, and a cell whose layers are absent, without a blank page', async () => {
      const empty = join(dir, 'empty.html');
      writeFileSync(empty, renderHtml(fixtureReport([])));
      expect(await open(empty)).toEqual([]);
      expect(await page.locator('[data-testid=problem]').textContent()).toMatch(/This report has no cells/);

      const bare = batchCell(5000, { layers: { driver: null, wire: null, server: null }, timings: null });
      const absent = join(dir, 'absent.html');
      writeFileSync(absent, renderHtml(fixtureReport([bare])));
      expect(await open(absent)).toEqual([]);
      const row = page.locator(`table.headline tr[data-key="${bare.key}"]`);
      expect(await row.locator('[data-field=driverCalls]').textContent()).toBe('-');
      expect(await row.locator('[data-field=p50]').textContent()).toBe('-');
    });
  });
}
