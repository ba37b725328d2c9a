package chaos

import (
	"reflect"
	"testing"
	"time"
)

func TestPlanIsReplayedBySeed(t *testing.T) {
	a := NewPlan(42, 2*time.Minute, AllNemeses)
	b := NewPlan(42, 2*time.Minute, AllNemeses)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different plans")
	}
	c := NewPlan(43, 2*time.Minute, AllNemeses)
	if reflect.DeepEqual(a.Steps, c.Steps) {
		t.Fatal("different seeds gave the same plan")
	}
	var total time.Duration
	seen := map[NemesisKind]bool{}
	for _, s := range a.Steps {
		total += s.Gap + s.Hold
		for _, f := range s.Faults {
			seen[f.Kind] = true
		}
	}
	if total < 2*time.Minute {
		t.Fatalf("plan covers %s, want >= 2m", total)
	}
	if len(seen) < len(AllNemeses)/2 {
		t.Fatalf("a 2-minute plan used only %d kinds: %v", len(seen), seen)
	}
}

func TestParseNemeses(t *testing.T) {
	ks, err := ParseNemeses("kill-leader, latency")
	if err != nil || len(ks) != 2 || ks[0] != KillLeader || ks[1] != Latency {
		t.Fatalf("got %v, %v", ks, err)
	}
	if _, err := ParseNemeses("kill-everything"); err == nil {
		t.Fatal("unknown nemesis accepted")
	}
	if ks, _ := ParseNemeses("all"); len(ks) != len(AllNemeses) {
		t.Fatal("all is not every kind")
	}
}
