// What approvals.mjs and console.mjs share: chromium as this machine runs it, the REPLY/ERROR line
// protocol the Rust tests read (tests/it/browser/mod.rs), and the page problems they report.

import { chromium } from 'playwright-core';

// The flags this machine needs (see the repository's testing notes): without the background
// networking ones, chromium keeps dialling Google's hosts, which a closed network refuses.
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function launch() {
  return chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
}

export function reply(value) {
  process.stdout.write(`REPLY ${JSON.stringify(value)}\n`);
}

export function fail(error) {
  const message = error && error.stack ? error.stack : String(error);
  // One line, without the colour codes of Playwright's call log.
  process.stdout.write(`ERROR ${message.replace(/\x1b\[[0-9;]*m/g, '').replace(/\n/g, ' | ')}\n`);
  process.exit(1);
}

// Script errors, CSP refusals and failed loads (the daemon's icon included), as the page's
// console reports them, with the resource a failed load was for.
export function problemsOf(page) {
  const problems = [];
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    if (!['error', 'warning'].includes(message.type())) return;
    const at = message.location()?.url ?? '';
    problems.push(`console ${message.type()}: ${message.text()}${at ? ` (${at})` : ''}`);
  });
  return problems;
}
