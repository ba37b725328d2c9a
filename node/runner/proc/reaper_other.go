//go:build !linux

package proc

import "errors"

// watchGroups: there is no reaper off Linux; a turn's group is killed at
// the node's next start.
func watchGroups(string) error {
	return errors.New("no turn reaper off Linux")
}
