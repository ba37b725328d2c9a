package layers

import (
	"testing"
)

// TestModuleLayers checks fak's own import graph against Rules and prints
// every violation with its import chain.
func TestModuleLayers(t *testing.T) {
	root, module, err := FindModule(".")
	if err != nil {
		t.Fatal(err)
	}
	g, err := Load(root, module)
	if err != nil {
		t.Fatal(err)
	}
	// A rule about a folder that no longer exists would check nothing.
	for _, r := range Rules {
		for _, patterns := range [][]string{r.From, r.Only, r.Never} {
			for _, pattern := range patterns {
				if !g.Covers(pattern) {
					t.Errorf("rule %s: no package of %s matches %q", r.Name, module, pattern)
				}
			}
		}
	}
	for _, v := range Check(g, Rules) {
		t.Error(v)
	}
}
