package main

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func newFakError(t *testing.T, code connect.Code, reason, message string) *connect.Error {
	t.Helper()
	err := connect.NewError(code, errors.New(message))
	detail, detailErr := connect.NewErrorDetail(&fakv1.ErrorInfo{Reason: reason, HeadSeq: 7})
	if detailErr != nil {
		t.Fatal(detailErr)
	}
	err.AddDetail(detail)
	return err
}

func TestFormatError(t *testing.T) {
	seqMismatch := newFakError(t, connect.CodeAborted, "SEQ_MISMATCH", "expected head 4, journal head is 7")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"reason replaces code", seqMismatch, "Error: SEQ_MISMATCH: expected head 4, journal head is 7"},
		{"wrapped keeps context", fmt.Errorf("create sessions: %w", seqMismatch),
			"Error: create sessions: SEQ_MISMATCH: expected head 4, journal head is 7"},
		{"no detail keeps code", connect.NewError(connect.CodeUnavailable, errors.New("dial tcp: refused")),
			"Error: unavailable: dial tcp: refused"},
		{"plain error", errors.New("read token file: no such file"), "Error: read token file: no such file"},
		{"one line", errors.New("first\nsecond\r\nthird\n"), "Error: first second third"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatError(tt.err); got != tt.want {
				t.Errorf("formatError = %q\nwant           %q", got, tt.want)
			}
		})
	}
}

func TestErrorInfoSurvivesTheWire(t *testing.T) {
	// Details travel encoded; the client decodes them from the registry.
	sent := newFakError(t, connect.CodeNotFound, "NOT_FOUND", "no session s-9")
	received := connect.NewWireError(sent.Code(), errors.New(sent.Message()))
	for _, detail := range sent.Details() {
		received.AddDetail(detail)
	}
	info := errorInfo(received)
	if info.GetReason() != "NOT_FOUND" || info.GetHeadSeq() != 7 {
		t.Errorf("errorInfo = %v", info)
	}
}
