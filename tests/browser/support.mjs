// What the browser tests share: a free port, polling until a condition
// holds, and the two checks every page gets — axe-core, and inert content
// that fits its window.
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

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
// the page grows sideways, or a table is wider than its panel (a clipped
// column scrolls out of sight).
export async function inertProblems(page) {
  return page.evaluate(() => {
    const out = [];
    if (window.__pwned !== undefined) out.push('a planted script ran');
    const sideways = document.documentElement.scrollWidth - window.innerWidth;
    if (sideways > 2) out.push(`the page scrolls sideways by ${sideways}px`);
    for (const w of document.querySelectorAll('.table-wrap')) {
      const over = w.scrollWidth - w.clientWidth;
      if (over > 1) out.push(`table ${w.querySelector('table')?.id} overflows its panel by ${over}px`);
    }
    return out;
  });
}
