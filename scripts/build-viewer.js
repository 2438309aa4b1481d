#!/usr/bin/env node
// Writes dist/report/viewer/viewer.js, the script report.html embeds, after tsc has built dist/.
const { mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const esbuild = require('esbuild');
const { bundleViewer, VIEWER_BUNDLE } = require('../dist/report/viewer/bundle.js');

const root = join(__dirname, '..');
const outDir = join(root, 'dist', 'report', 'viewer');
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, VIEWER_BUNDLE), bundleViewer(esbuild, join(root, 'src', 'report', 'viewer', 'main.ts')));
