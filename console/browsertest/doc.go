// Package browsertest drives the carmy console in headless Chromium: it
// loads the console, submits forms, calls tools, and approves and denies
// the calls of an agent in the page. It is a module of its own, so that the
// root module does not depend on chromedp.
//
// The tests find Chromium on the PATH (chromium, chromium-browser or
// google-chrome), or at the path CHROMIUM names, and skip without one,
// unless CHROMIUM is set. -update-screenshots rewrites the screenshots of
// docs/console.md.
package browsertest
