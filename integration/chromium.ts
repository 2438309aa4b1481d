/** The headless Chromium the report tests and scripts/report-example.ts drive (Debian's package by default). */
export const CHROMIUM = process.env['SQLTALLY_CHROMIUM'] ?? '/usr/bin/chromium';

/** The flags a closed network needs: without them Chromium keeps trying to reach Google's hosts. */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
