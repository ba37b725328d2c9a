//go:build !linux

package proc

import "errors"

// groupReaper: there is no reaper off Linux; a turn's group is killed at
// the node's next start.
type groupReaper struct{}

func startReaper(string, string) (*groupReaper, error) {
	return nil, errors.New("no turn reaper off Linux")
}

func (*groupReaper) close() {}
