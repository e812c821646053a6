// What the browser tests share: a free port, polling until a condition
// holds, the browser and its page, and the two checks every page gets —
// axe-core, and inert content that fits its window.
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

// Polls `fn` every 250 ms until it returns something truthy (returned);
// throws after `timeoutMs`, with `context()` (e.g. an app's log) appended.
export async function eventuallyOr(what, fn, timeoutMs, context = () => '') {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})${context()}`);
}

// Debian's Chromium (CHROMIUM, default /usr/bin/chromium; no downloaded browser
// build) and one page in a 1280×800 context. The page's uncaught exceptions and
// console errors are pushed to `errors`; a `token`, when given, is in
// sessionStorage before any page script runs, so the console does not ask for
// it. The caller closes `browser`.
export async function launchBrowser({ errors = [], token } = {}) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  if (token) await context.addInitScript((t) => sessionStorage.setItem('harvest.token', t), token);
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${m.text()} @ ${m.location().url}`);
  });
  return { browser, page };
}

// axe-core in the page (evaluated over the DevTools protocol, which the
// page's Content-Security-Policy does not govern): its serious and critical
// violations.
export async function accessibilityViolations(page) {
  return page.evaluate(async (source) => {
    if (!window.axe) (0, eval)(source);
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, AXE);
}

// What is wrong with the page, if anything: a script planted in data ran,
// a stylesheet it links did not load (refused, missing or empty), the page
// grows sideways, or a table is wider than its panel (a clipped column
// scrolls out of sight).
export async function inertProblems(page) {
  return page.evaluate(() => {
    const out = [];
    if (window.__pwned !== undefined) out.push('a planted script ran');
    for (const link of document.querySelectorAll('link[rel="stylesheet"]')) {
      let rules = 0;
      try {
        rules = link.sheet?.cssRules.length ?? 0;
      } catch {
        // another origin's sheet: its rules are not readable
      }
      if (rules === 0) out.push(`stylesheet ${link.getAttribute('href')} did not load`);
    }
    const sideways = document.documentElement.scrollWidth - window.innerWidth;
    if (sideways > 2) out.push(`the page scrolls sideways by ${sideways}px`);
    for (const w of document.querySelectorAll('.table-wrap')) {
      const over = w.scrollWidth - w.clientWidth;
      if (over > 1) out.push(`table ${w.querySelector('table')?.id} overflows its panel by ${over}px`);
    }
    return out;
  });
}
