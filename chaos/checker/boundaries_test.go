package checker

import (
	"strings"
	"testing"
)

func chain() LaunchLineage {
	return LaunchLineage{Root: "r", Default: "c2", Acked: []string{"p1", "p2"}, Nodes: []LineageNode{
		{Session: "r", Children: []string{"c1"}, Stopped: true, StopReason: "PROVIDER_SESSION_CLEAR"},
		{Session: "c1", Parent: "r", Children: []string{"c2"}, Stopped: true, StopReason: "PROVIDER_SESSION_CLEAR", ProviderSessionID: "p1"},
		{Session: "c2", Parent: "c1", ProviderSessionID: "p2"},
	}}
}

func TestBoundariesAcceptsOneChildPerClear(t *testing.T) {
	if r := Boundaries(map[string]LaunchLineage{"L": chain()}); !r.Ok {
		t.Fatal(r.Summary())
	}
}

func TestBoundariesCatchesDuplicates(t *testing.T) {
	cases := map[string]struct {
		mutate func(*LaunchLineage)
		want   string
	}{
		"two children": {func(l *LaunchLineage) {
			l.Nodes[1].Children = []string{"c2", "c2b"}
			l.Nodes = append(l.Nodes, LineageNode{Session: "c2b", Parent: "c1", ProviderSessionID: "p2"})
		}, "2 children"},
		"same provider id twice": {func(l *LaunchLineage) {
			l.Nodes[2].Children = []string{"c3"}
			l.Nodes[2].Stopped, l.Nodes[2].StopReason = true, "PROVIDER_SESSION_CLEAR"
			l.Nodes = append(l.Nodes, LineageNode{Session: "c3", Parent: "c2", ProviderSessionID: "p1"})
			l.Default = "c3"
		}, "opened two sessions"},
		"acknowledged clear lost": {func(l *LaunchLineage) { l.Acked = append(l.Acked, "p3") }, "opened no session"},
		"default left behind":     {func(l *LaunchLineage) { l.Default = "c1" }, "default session is c1"},
		"parent not stopped":      {func(l *LaunchLineage) { l.Nodes[1].Stopped = false }, "not stopped"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := chain()
			c.mutate(&l)
			r := Boundaries(map[string]LaunchLineage{"L": l})
			if r.Ok || !strings.Contains(strings.Join(r.Violations, "\n"), c.want) {
				t.Fatalf("want %q, got %s", c.want, r.Summary())
			}
		})
	}
}
