//go:build !linux && !darwin

package guard

import (
	"errors"
	"net"
)

// peerUID cannot check a peer here, so the socket refuses every peer (fail
// closed; the hooks then fail open).
func peerUID(*net.UnixConn) (int, error) {
	return 0, errors.New("peer credentials are not supported on this platform")
}
