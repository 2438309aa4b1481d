#!/usr/bin/env node
// Writes dist/reports/viewer/viewer.js, the script report.html embeds, after tsc has built dist/.
const { mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const esbuild = require('esbuild');
const { bundleViewer, VIEWER_BUNDLE } = require('../dist/reports/viewer/bundle.js');

const root = join(__dirname, '..');
const outDir = join(root, 'dist', 'reports', 'viewer');
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, VIEWER_BUNDLE), bundleViewer(esbuild, join(root, 'reports', 'viewer', 'main.ts')));
