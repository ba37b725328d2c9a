// Package witness holds the two-client witness (issue 4): one live session
// opened from the terminal client (`fak session open`, the real binary) and
// from the browser page (/ui/, in a real headless Chromium driven by
// chromedp) on different nodes of a real three-node cluster, both showing
// the same addressed transcript while the input lease passes between them.
// TestConformPage checks the page against the client conformance corpus
// (client/conformance), rendering each descriptor without a fleet.
//
// The tests need Chromium on PATH (Debian's chromium package; .ci/run
// installs it). Without it they skip, except under CI=true, where they
// fail. They skip under -short. A screenshot of the page is written to
// $FAK_ARTIFACTS (default: the test's temp dir) and its path logged.
package witness
