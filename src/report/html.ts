import type { Report } from './schema';
import { escapeXml } from './svg';
import { viewerScript } from './viewer/bundle';

/** report.html's file name in a report directory. */
export const HTML_FILE = 'report.html';

const STYLE = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5rem; color: #1d1d1f; }
h1 { margin: 0 0 .25rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; } h3 { margin-bottom: .25rem; }
.meta, .hint, .skipped { color: #555; }
.problem { background: #fff4f4; border: 1px solid #e0a0a0; padding: .6rem .9rem; border-radius: 6px; margin: .8rem 0; }
.finding { font-weight: 600; }
table { border-collapse: collapse; margin: .5rem 0; }
th, td { padding: .2rem .6rem; border-bottom: 1px solid #eee; text-align: left; white-space: nowrap; }
th { background: #f6f6f6; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict.assert { color: #1a7f37; } .verdict.report { color: #9a6700; } .verdict.incomplete { color: #cf222e; font-weight: 600; }
table.cells tbody tr { cursor: pointer; } table.cells tbody tr:hover, tr.selected { background: #eef4ff; }
.split { display: flex; gap: 1.5rem; align-items: flex-start; }
.split > section { flex: 1 1 auto; overflow: auto; max-height: 80vh; }
.details-box { flex: 0 0 32rem; position: sticky; top: 1rem; border: 1px solid #ddd; border-radius: 6px; padding: .5rem 1rem; max-height: 80vh; overflow: auto; }
.details-box li { margin: .2rem 0; white-space: normal; }
dl { display: grid; grid-template-columns: max-content auto; gap: .1rem 1rem; } dt { color: #555; } dd { margin: 0; }
.chart svg { max-width: 100%; height: auto; }
input[type=search] { width: 22rem; padding: .25rem; }
`;

/** JSON inside a script element: nothing in it may close the element or end a JavaScript line. */
function embeddedJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/**
 * report.html: one self-contained page (no network, no CDN): the report's data embedded as JSON and the viewer
 * script that draws the headline, the count charts and a filterable cell table with each cell's reconciliation.
 */
export function renderHtml(report: Report): string {
  const title = `sqltally report ${report.startedAt}`;
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    // Nothing of the page's own may reach the network: scripts and styles are inline, images are data or inline SVG.
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">`,
    `<title>${escapeXml(title)}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    '<h1>sqltally report</h1>',
    '<div id="tools"></div>',
    '<main id="report"><noscript><p class="problem">This page draws its tables with JavaScript, which is off. report.md beside it has the same headline.</p></noscript></main>',
    `<script type="application/json" id="report-data">${embeddedJson(report)}</script>`,
    `<script>${viewerScript().replace(/<\/script/gi, '<\\/script')}</script>`,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
