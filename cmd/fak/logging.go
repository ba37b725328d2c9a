package main

import (
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"
)

func newLogger(name, level string, json bool, out io.Writer) (hclog.Logger, error) {
	lvl := hclog.LevelFromString(level)
	if lvl == hclog.NoLevel {
		return nil, fmt.Errorf("unknown log level %q (trace, debug, info, warn, error)", level)
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      lvl,
		JSONFormat: json,
		Output:     out,
	}), nil
}
