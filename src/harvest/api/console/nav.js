// harvest console: the two router entry points that page code calls, render()
// and navigate(). The router itself is app.js, which imports every page; it
// registers its render() here at start-up, so the pages reach it without an
// import cycle.

let renderer = null;

export function setRenderer(fn) {
  renderer = fn;
}

// Renders the current hash again: app.js's render(), which see.
export function render(options) {
  return renderer(options);
}

export function navigate(hash) {
  if (location.hash === hash) render({ navigated: true });
  else location.hash = hash; // hashchange renders
}
