package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSizeValue is a flag of a size in bytes: a count, or one with a unit
// (KB, MB, GB: powers of 1000; KiB, MiB, GiB: of 1024).
type byteSizeValue struct{ p *int64 }

var byteUnits = []struct {
	suffix string
	scale  int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

func (v byteSizeValue) String() string {
	if v.p == nil {
		return ""
	}
	return formatBytes(*v.p)
}

func (v byteSizeValue) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func parseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	scale := int64(1)
	num := s
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, scale = strings.TrimSpace(rest), u.scale
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/scale {
		return 0, fmt.Errorf("%q is not a size in bytes (e.g. 64MiB, 100MB, 0)", s)
	}
	return n * scale, nil
}

// formatBytes writes n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	for i := 2; i >= 0; i-- {
		if u := byteUnits[i]; n >= u.scale && n%u.scale == 0 {
			return strconv.FormatInt(n/u.scale, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
