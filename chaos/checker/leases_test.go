package checker

import (
	"strings"
	"testing"
)

func leaseTake(seq uint64, t int64, att, stolen string, exp int64) LeaseEvent {
	return LeaseEvent{Seq: seq, Kind: "lease.taken", TimeUnixNano: t, AttachmentID: att, StolenFrom: stolen, ExpiresUnixNano: exp}
}

func leaseRelease(seq uint64, att string) LeaseEvent {
	return LeaseEvent{Seq: seq, Kind: "lease.released", AttachmentID: att}
}

func leaseInput(seq uint64, att, text string) LeaseEvent {
	return LeaseEvent{Seq: seq, Kind: "input", AttachmentID: att, Text: text}
}

func TestLeasesAcceptsAValidHistory(t *testing.T) {
	j := map[string][]LeaseEvent{"s": {
		leaseTake(3, 100, "a", "", 200), leaseInput(4, "a", "a1"), leaseRelease(5, "a"),
		leaseTake(6, 300, "b", "", 400), leaseInput(7, "b", "b1"),
		leaseTake(8, 350, "c", "b", 450), leaseInput(9, "c", "c1"),
		leaseTake(10, 460, "a", "", 560), // c's lease expired at 450
		leaseInput(11, "a", "a2"),
	}}
	acts := []ActRecord{
		{Session: "s", AttachmentID: "a", Text: "a1", Outcome: "ok", Seq: 4},
		{Session: "s", AttachmentID: "b", Text: "b2", Outcome: "fail", Reason: "LEASE_NOT_HELD"},
		{Session: "s", AttachmentID: "c", Text: "c1", Outcome: "info"},
	}
	r := Leases(j, acts)
	if !r.Ok || r.Steals != 1 || r.Takes != 4 || r.Inputs != 4 {
		t.Fatalf("valid history rejected: %s", r.Summary())
	}
}

func TestLeasesCatchesViolations(t *testing.T) {
	cases := map[string]struct {
		j    []LeaseEvent
		acts []ActRecord
		want string
	}{
		"two holders":             {j: []LeaseEvent{leaseTake(3, 100, "a", "", 200), leaseTake(4, 150, "b", "", 250)}, want: "two holders"},
		"input from a non-holder": {j: []LeaseEvent{leaseTake(3, 100, "a", "", 200), leaseInput(4, "b", "x")}, want: "input from b"},
		"input with no holder":    {j: []LeaseEvent{leaseInput(3, "a", "x")}, want: "input from a"},
		"steal names the wrong holder": {j: []LeaseEvent{leaseTake(3, 100, "a", "", 200), leaseTake(4, 150, "c", "b", 250)},
			want: "stole the lease from b"},
		"release by a non-holder": {j: []LeaseEvent{leaseTake(3, 100, "a", "", 200), leaseRelease(4, "b")}, want: "released by b"},
		"acknowledged input lost": {j: []LeaseEvent{leaseTake(3, 100, "a", "", 200)},
			acts: []ActRecord{{Session: "s", AttachmentID: "a", Text: "x", Outcome: "ok", Seq: 4}}, want: "missing"},
		"refused input present": {j: []LeaseEvent{leaseTake(3, 100, "a", "", 200), leaseInput(4, "a", "x")},
			acts: []ActRecord{{Session: "s", AttachmentID: "a", Text: "x", Outcome: "fail", Reason: "LEASE_NOT_HELD"}}, want: "refused"},
		"acknowledged at another address": {j: []LeaseEvent{leaseTake(3, 100, "a", "", 200), leaseInput(5, "a", "x")},
			acts: []ActRecord{{Session: "s", AttachmentID: "a", Text: "x", Outcome: "ok", Seq: 4}}, want: "acknowledged at #4"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := Leases(map[string][]LeaseEvent{"s": c.j}, c.acts)
			if r.Ok || !strings.Contains(strings.Join(r.Violations, "\n"), c.want) {
				t.Fatalf("want a violation containing %q, got %s", c.want, r.Summary())
			}
		})
	}
}
