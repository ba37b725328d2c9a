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

// transportHint explains a connection a node dropped during or right after
// the TLS handshake when fakctl offered no client certificate: with TLS 1.3
// the refusal arrives after the client's first write, so the error itself
// reads "broken pipe" or "connection reset" rather than "certificate
// required".
func (c *cli) transportHint(err error) string {
	if !c.noClientCert {
		return ""
	}
	msg := err.Error()
	for _, sign := range []string{"certificate required", "broken pipe", "connection reset", "EOF", "bad certificate", "could not be established"} {
		if strings.Contains(msg, sign) {
			return " (the node may require a client certificate: --tls-cert and --tls-key, or FAK_CLIENT_CERT and FAK_CLIENT_KEY)"
		}
	}
	return ""
}
