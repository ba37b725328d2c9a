package apiclient

import (
	"errors"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// ErrorInfo returns the machine-readable detail (reason, head_seq,
// leader_addr) a fak server attaches to its errors, or nil.
func ErrorInfo(err error) *fakv1.ErrorInfo {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, detail := range ce.Details() {
		value, decodeErr := detail.Value()
		if decodeErr != nil {
			continue
		}
		if info, ok := value.(*fakv1.ErrorInfo); ok {
			return info
		}
	}
	return nil
}
