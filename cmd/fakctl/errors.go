package main

import (
	"errors"
	"strings"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// formatError renders err as the single line fakctl prints on failure.
func formatError(err error) string {
	return "Error: " + errorMessage(err)
}

// errorMessage describes err on one line. For an RPC error that carries a
// fak ErrorInfo, the machine-readable reason replaces the generic code, e.g.
// "SEQ_MISMATCH: expected head 4, journal head is 7".
func errorMessage(err error) string {
	msg := err.Error()
	var connectErr *connect.Error
	if errors.As(err, &connectErr) {
		// Keep whatever context a command wrapped around the RPC error.
		prefix, wrapped := strings.CutSuffix(msg, connectErr.Error())
		if !wrapped {
			prefix = ""
		}
		msg = prefix + connectErr.Error()
		if info := errorInfo(connectErr); info != nil && info.GetReason() != "" {
			msg = prefix + info.GetReason()
			if detail := connectErr.Message(); detail != "" {
				msg += ": " + detail
			}
		}
	}
	return singleLine(msg)
}

// errorInfo returns the fak ErrorInfo detail of err, or nil.
func errorInfo(err *connect.Error) *fakv1.ErrorInfo { return apiclient.ErrorInfo(err) }

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

func singleLine(s string) string {
	return lineBreaks.Replace(strings.TrimSpace(s))
}
