package checker

import (
	"fmt"
)

// LeaseEvent is one lease-relevant journal event of a session, decoded
// from its kind and JSON data.
type LeaseEvent struct {
	Seq          uint64
	Kind         string // lease.taken, lease.released, input
	TimeUnixNano int64
	AttachmentID string
	StolenFrom   string // lease.taken
	// ExpiresUnixNano of a lease.taken: the lease's expiry unless renewed
	// (renewals write no event, so they can only make it later).
	ExpiresUnixNano int64
	Text            string // input
}

// ActRecord is what a client was told about one input it submitted.
type ActRecord struct {
	Session      string
	AttachmentID string
	Text         string // unique per act
	// Outcome: "ok" (acknowledged at Seq), "fail" (certainly refused,
	// Reason says why) or "info" (unknown).
	Outcome string
	Seq     uint64
	Reason  string
}

// LeaseResult is the verdict of Leases.
type LeaseResult struct {
	Ok         bool
	Violations []string
	Sessions   int
	Takes      int
	Steals     int
	Releases   int
	Inputs     int
	ActsOK     int
	ActsFailed int
}

// Leases checks the input lease from the final journals and what clients
// were told:
//   - at every address at most one attachment holds the lease: a lease.taken
//     either names the holder it stole from, or comes when nobody holds it,
//     or no earlier than the holder's lease expiry;
//   - a lease.released is by the holder;
//   - every input event comes from the attachment holding the lease;
//   - every acknowledged input is in the journal at its address with its
//     text and author, and no certainly-refused input is.
func Leases(journals map[string][]LeaseEvent, acts []ActRecord) LeaseResult {
	r := LeaseResult{Sessions: len(journals)}
	bad := func(format string, args ...any) { r.Violations = append(r.Violations, fmt.Sprintf(format, args...)) }
	type where struct {
		session string
		seq     uint64
		author  string
	}
	inputs := map[string]where{}
	for id, evs := range journals {
		holder, expires := "", int64(0)
		for _, e := range evs {
			switch e.Kind {
			case "lease.taken":
				r.Takes++
				switch {
				case e.StolenFrom != "":
					r.Steals++
					if e.StolenFrom != holder {
						bad("%s #%d: %s stole the lease from %s, but %q held it", id, e.Seq, e.AttachmentID, e.StolenFrom, holder)
					}
				case holder != "" && holder != e.AttachmentID && e.TimeUnixNano < expires:
					bad("%s #%d: %s took the lease while %s held it until %d (two holders)", id, e.Seq, e.AttachmentID, holder, expires)
				}
				holder, expires = e.AttachmentID, e.ExpiresUnixNano
			case "lease.released":
				r.Releases++
				if e.AttachmentID != holder {
					bad("%s #%d: lease released by %s, but %q held it", id, e.Seq, e.AttachmentID, holder)
				}
				holder, expires = "", 0
			case "input":
				r.Inputs++
				if e.AttachmentID != holder {
					bad("%s #%d: input from %s, but the lease holder was %q", id, e.Seq, e.AttachmentID, holder)
				}
				inputs[e.Text] = where{id, e.Seq, e.AttachmentID}
			}
		}
	}
	for _, a := range acts {
		w, found := inputs[a.Text]
		switch a.Outcome {
		case "ok":
			r.ActsOK++
			switch {
			case !found:
				bad("%s: acknowledged input %q (#%d) is missing", a.Session, a.Text, a.Seq)
			case w.session != a.Session || w.seq != a.Seq || w.author != a.AttachmentID:
				bad("%s: input %q acknowledged at #%d by %s is at %s #%d by %s", a.Session, a.Text, a.Seq, a.AttachmentID, w.session, w.seq, w.author)
			}
		case "fail":
			r.ActsFailed++
			if found {
				bad("%s: input %q refused with %s is in the journal at #%d", a.Session, a.Text, a.Reason, w.seq)
			}
		}
	}
	r.Ok = len(r.Violations) == 0
	return r
}

// Summary is one line, plus the first violations.
func (r LeaseResult) Summary() string {
	return Summarize("leases", r.Violations, fmt.Sprintf("%d session(s), %d takes (%d steals), %d releases, %d inputs; acts %d acknowledged, %d refused", r.Sessions, r.Takes, r.Steals, r.Releases, r.Inputs, r.ActsOK, r.ActsFailed))
}
