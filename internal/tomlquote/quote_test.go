package tomlquote

import "testing"

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:           `"plain"`,
		`say "hi" \ bye`:  `"say \"hi\" \\ bye"`,
		"a\nb\tc\rd\x01e": `"a\nb\tc\rd\u0001e"`,
		"del\x7f":         `"del\u007F"`,
		"ünïcode":         `"ünïcode"`,
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %s, want %s", in, got, want)
		}
	}
}
