// Package conformance is the client conformance fixture of the session
// contract (DESIGN.md §7): one corpus of (descriptor, action) cases that
// every first-party client — the terminal client (client/term) and the
// browser page (api/web) — is checked against, so neither can hide,
// invent or misreport a control of the capability set.
//
// The corpus, testdata/controls.json, holds cases. Each is a session
// descriptor as the fleet sends it (DescribeSessionResponse in protojson,
// as one attachment sees it), the controls a user triggers on it, and one
// want line per control of its capability set:
//
//	input.text       unavailable LEASE_NOT_HELD → lease.steal
//	lease.steal      available
//	approval.answer  unavailable NO_PENDING_APPROVAL
//
// The cases cover every control in its available state and every reason
// the fleet gives for one being unavailable (not attached, lease held by
// another or by this attachment, lease free, no pending approval, a turn
// in flight, a move open, the session stopped), plus a control from a
// newer fleet that no client knows, which each must show as unavailable
// (ReasonUnsupported) rather than hide. The descriptors were captured
// from the fleet's capability function; Parse checks that each agrees
// with its want lines.
//
// Each client reports what it presents in the same shape, Presented: the
// terminal from term.Controls, the function its own controls listing
// prints from; the page from the DOM its renderer builds (each control
// row carries data-control, data-available, data-reason, data-message
// and data-handoff; window.fakConformance renders a descriptor without a
// fleet and reads the rows back). Compare reports every difference from
// the wants: a control not presented or presented without being in the
// descriptor, another availability, reason or handoff, a message that is
// not the descriptor's, a reason or handoff the user does not see.
// CompareAction checks one action: the client offers a trigger, goes
// ahead exactly when the control is available, and otherwise refuses
// with its reason and handoff.
//
// The checks: client/term's TestConformance (the terminal, in Go) and
// e2e/witness's TestConformPage (the page, in headless Chromium). Both
// also show the fixture bites: a control dropped from what the client
// presents, or from the controls it knows how to drive, fails the
// comparison.
package conformance
