package main

import "testing"

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "56MiB": 56 << 20, "64MB": 64e6, "1GiB": 1 << 30, "512KiB": 512 << 10, "100B": 100, " 2 GB ": 2e9, "12345": 12345,
	} {
		got, err := parseByteSize(in)
		if err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1MiB", "MiB", "1.5GiB", "10TB", "9999999999GiB", "sixty"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
	for n, want := range map[int64]string{56 << 20: "56MiB", 1 << 30: "1GiB", 1000: "1000B", 3 << 10: "3KiB", 0: "0B"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
