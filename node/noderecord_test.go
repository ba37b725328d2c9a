package node

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

func TestNodeRecord_FromGossipCapabilities(t *testing.T) {
	cfg := Config{
		Labels:    map[string]string{"zone": "a", "gpu": "yes", "arch": "arm64"},
		Models:    []string{"m2", "m1", "m2"},
		Providers: []string{"p"}, AccountRefs: []string{"team-b", "team-a"}, Capacity: 7,
	}
	if err := cfg.checkCapabilities(); err != nil {
		t.Fatal(err)
	}
	m := cluster.Member{Name: "n1", Status: cluster.StatusAlive, Meta: cluster.NodeMeta{
		APIAddr: "10.0.0.1:7401", RaftAddr: "10.0.0.1:7501", Caps: new(cfg.capabilities([]string{"echo"})),
	}}
	rec := recordOf(m)
	var labels []string
	for _, l := range rec.Labels {
		labels = append(labels, l.Key+"="+l.Value)
	}
	if got := strings.Join(labels, ","); got != "arch=arm64,gpu=yes,zone=a" {
		t.Fatalf("labels %s, want sorted by key", got)
	}
	if strings.Join(rec.Models, ",") != "m1,m2" || strings.Join(rec.AccountRefs, ",") != "team-a,team-b" ||
		strings.Join(rec.RuntimeAdapters, ",") != "echo" || rec.Capacity != 7 || rec.ApiAddr != "10.0.0.1:7401" ||
		rec.RuleVersion != fsm.RuleVersion {
		t.Fatalf("record %v", rec)
	}
	committed := &fsmpb.NodeRecord{Name: rec.Name, ApiAddr: rec.ApiAddr, RaftAddr: rec.RaftAddr, Labels: rec.Labels,
		RuntimeAdapters: rec.RuntimeAdapters, Providers: rec.Providers, Models: rec.Models, AccountRefs: rec.AccountRefs,
		Capacity: rec.Capacity, Draining: true, UpdatedUnixNano: 42, RuleVersion: rec.RuleVersion}
	if !sameOffer(committed, rec) {
		t.Fatal("the draining flag or commit time made a record differ from its offer")
	}
	committed.Capacity = 8
	if sameOffer(committed, rec) {
		t.Fatal("a changed capacity went unnoticed")
	}
	committed.Capacity, committed.RuleVersion = rec.Capacity, 0
	if sameOffer(committed, rec) {
		t.Fatal("an upgraded build's rule version went unnoticed")
	}
	if recordOf(cluster.Member{Name: "old"}) != nil {
		t.Fatal("a member advertising no capabilities got a record")
	}
}

func TestNodeRecord_RefusesCapabilitiesGossipCannotCarry(t *testing.T) {
	var models []string
	for i := 0; i < 40; i++ {
		models = append(models, fmt.Sprintf("a-rather-long-model-name-%02d", i))
	}
	for name, cfg := range map[string]Config{
		"too large":   {Models: models},
		"empty model": {Models: []string{""}},
		"empty label": {Labels: map[string]string{"": "x"}},
	} {
		if err := cfg.checkCapabilities(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Issue 32 §5: the node record says what meters each provider CLI and
// model runtime. A provider CLI is metered by the node's gateway as soon
// as the node has an account of its provider, so adding one switches it;
// gateway = false keeps the CLI's reported cost.
func TestNodeRecord_SaysWhatMetersEachRuntime(t *testing.T) {
	on, off := true, false
	cfg := Config{
		Accounts: []AccountConfig{{Name: "a-main", Provider: "anthropic", Upstream: "https://api.anthropic.com", APIKeyEnv: "K"}},
		Runtimes: []RuntimeConfig{
			{Name: "claude", Adapter: AdapterClaude},
			{Name: "claude-direct", Adapter: AdapterClaude, Gateway: &off},
			{Name: "codex", Adapter: AdapterCodex},
			{Name: "gpt", Adapter: AdapterModel, Gateway: &on},
			{Name: "local", Adapter: AdapterModel},
			{Name: "echo", Adapter: AdapterEcho},
		},
	}
	meters := func() string {
		m := cluster.Member{Name: "n1", Status: cluster.StatusAlive, Meta: cluster.NodeMeta{Caps: new(cfg.capabilities([]string{"echo"}))}}
		return strings.Join(recordOf(m).RuntimeMeters, ",")
	}
	if got, want := meters(), "claude-direct=cli,claude=gateway,codex=cli,gpt=gateway,local=runtime"; got != want {
		t.Fatalf("runtime meters %s, want %s", got, want)
	}
	rec := &fsmpb.NodeRecord{RuntimeMeters: strings.Split(meters(), ",")}
	if fsm.MeteredBy(rec, "codex") != "cli" || fsm.MeteredBy(rec, "claude") != "gateway" || fsm.MeteredBy(rec, "echo") != "" {
		t.Fatalf("MeteredBy of %v", rec.RuntimeMeters)
	}
	// An account of OpenAI switches codex to the gateway.
	cfg.Accounts = append(cfg.Accounts, AccountConfig{Name: "o-main", Provider: "openai", Upstream: "https://api.openai.com", APIKeyEnv: "K"})
	if got, want := meters(), "claude-direct=cli,claude=gateway,codex=gateway,gpt=gateway,local=runtime"; got != want {
		t.Fatalf("after adding an openai account: %s, want %s", got, want)
	}
}
