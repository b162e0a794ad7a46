// Package console holds the files of carmy's console, the page a person
// opens to watch calls and decide approvals: the page, its script and its
// style sheet, embedded so that the console ships inside every binary. It
// also holds what carries the console's secret to the person without
// exposing it: one-time codes for the links sent to clients ([Codes]), and
// the owner-only files that hold a local server's console link, which
// `carmy approvals` finds ([WriteFile], [Find]). The handlers that serve
// the console, which need the registry, live with it.
package console

import "embed"

// Files holds index.html, the page, and the assets it loads from
// /console/assets/: console.js and console.css.
//
//go:embed index.html console.js console.css
var Files embed.FS
