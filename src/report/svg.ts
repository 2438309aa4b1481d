import type { HeadlineBackend, HeadlineRow } from './headline';
import { formatMs } from './timings';

const ROW_HEIGHT = 22;
const LABEL_WIDTH = 300;
const PANEL_WIDTH = 300;
const GAP = 40;
/** Room right of the time panel for the longest bar's label. */
const RIGHT = 110;
const TOP = 48;
const BOTTOM = 28;
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12"';
const STATEMENTS_COLOUR = '#4c78a8';
const CALLS_COLOUR = '#f58518';
const TIME_COLOUR = '#54a24b';

/** Escapes text for SVG and HTML text and attribute values. */
export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A file name part from a backend id: `mariadb@10.11` -> `mariadb-10.11`. */
export function chartFileName(h: Pick<HeadlineBackend, 'backend' | 'serverVersion'>): string {
  return `counts-${`${h.backend}-${h.serverVersion}`.replace(/[^A-Za-z0-9._-]+/g, '-')}.svg`;
}

/** Powers of ten from 1 up to the first at or above `max`: the log axis's ticks. */
function decades(max: number): number[] {
  const out = [1];
  while (out[out.length - 1]! < max) out.push(out[out.length - 1]! * 10);
  return out;
}

function compact(n: number): string {
  if (n >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
  return String(n);
}

/**
 * One backend's picture of counts: per strategy (cheapest first, as in the headline table), driver calls and server
 * statements on a log scale, beside the p50 time on a linear scale. A missing figure is drawn as "-", never as 0.
 */
export function countsChart(h: HeadlineBackend): string {
  const rows = h.strategies;
  const height = TOP + rows.length * ROW_HEIGHT + BOTTOM;
  const width = LABEL_WIDTH + PANEL_WIDTH * 2 + GAP + RIGHT;
  const countsX = LABEL_WIDTH;
  const timeX = LABEL_WIDTH + PANEL_WIDTH + GAP;
  const maxCount = Math.max(1, ...rows.flatMap((r) => [r.serverStatements ?? 0, r.driverCalls ?? 0]));
  const ticks = decades(maxCount);
  const top = ticks[ticks.length - 1]!;
  // log10(n + 1) keeps 0 at the axis and 1 just off it, so a path with no statements is visibly different from one.
  const logX = (n: number) => countsX + (Math.log10(n + 1) / Math.log10(top + 1)) * PANEL_WIDTH;
  const maxTime = Math.max(0, ...rows.map((r) => r.p50Ns ?? 0));
  const timeW = (ns: number) => (maxTime > 0 ? (ns / maxTime) * PANEL_WIDTH : 0);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${escapeXml(`${h.backend} ${h.serverVersion}: statements and p50 time per strategy at ${h.rows} rows`)}">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<g ${FONT} fill="#222">`,
    `<text x="8" y="18" font-size="14" font-weight="bold">${escapeXml(`${h.backend} (${h.serverVersion}), ${h.rows} rows`)}</text>`,
    `<text x="${countsX}" y="38"><tspan fill="${CALLS_COLOUR}">■ driver calls</tspan> <tspan fill="${STATEMENTS_COLOUR}">■ server statements</tspan> (log scale)</text>`,
    `<text x="${timeX}" y="38"><tspan fill="${TIME_COLOUR}">■ p50 time</tspan> (linear)</text>`,
  ];
  for (const t of ticks) {
    const x = logX(t).toFixed(1);
    out.push(`<line x1="${x}" y1="${TOP - 4}" x2="${x}" y2="${height - BOTTOM}" stroke="#ddd"/>`);
    out.push(`<text x="${x}" y="${height - BOTTOM + 14}" text-anchor="middle" fill="#666">${compact(t)}</text>`);
  }
  out.push(`<line x1="${timeX}" y1="${TOP - 4}" x2="${timeX}" y2="${height - BOTTOM}" stroke="#ddd"/>`);
  if (maxTime > 0)
    out.push(`<text x="${timeX + PANEL_WIDTH}" y="${height - BOTTOM + 14}" text-anchor="end" fill="#666">${escapeXml(formatMs(maxTime))} ms</text>`);
  rows.forEach((r: HeadlineRow, i) => {
    const y = TOP + i * ROW_HEIGHT;
    out.push(`<text x="${LABEL_WIDTH - 8}" y="${y + 15}" text-anchor="end">${escapeXml(`${r.strategy} (${r.driver})`)}</text>`);
    const bar = (value: number | null, dy: number, colour: string, what: string) => {
      if (value === null) {
        out.push(`<text x="${countsX + 4}" y="${y + dy + 8}" fill="#999">-</text>`);
        return;
      }
      const w = Math.max(1, logX(value) - countsX);
      out.push(
        `<rect x="${countsX}" y="${y + dy}" width="${w.toFixed(1)}" height="8" fill="${colour}"><title>${escapeXml(`${r.strategy}: ${value} ${what}`)}</title></rect>`,
      );
      out.push(`<text x="${(countsX + w + 4).toFixed(1)}" y="${y + dy + 8}" font-size="10">${compact(value)}</text>`);
    };
    bar(r.driverCalls, 2, CALLS_COLOUR, 'driver calls');
    bar(r.serverStatements, 11, STATEMENTS_COLOUR, 'server statements');
    if (r.p50Ns === null) out.push(`<text x="${timeX + 4}" y="${y + 15}" fill="#999">-</text>`);
    else {
      const w = Math.max(1, timeW(r.p50Ns));
      out.push(
        `<rect x="${timeX}" y="${y + 4}" width="${w.toFixed(1)}" height="12" fill="${TIME_COLOUR}"><title>${escapeXml(`${r.strategy}: p50 ${formatMs(r.p50Ns)} ms`)}</title></rect>`,
      );
      out.push(`<text x="${(timeX + w + 4).toFixed(1)}" y="${y + 15}" font-size="10">${escapeXml(formatMs(r.p50Ns))} ms</text>`);
    }
  });
  out.push('</g>', '</svg>');
  return out.join('\n');
}
