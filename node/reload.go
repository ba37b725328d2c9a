package node

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fak-dev/fak/api"
)

// Reload (fak agent's SIGHUP) reads the tokens file and the TLS
// certificate, key and CA again and puts them in use without a restart,
// like Consul's reload of its TLS material: new connections and calls use
// them, established ones finish with what they have. Everything is read
// and checked before anything changes: a file that does not load leaves
// the node as it was, and the error says which.

// ReloadReport says what a reload put in use.
type ReloadReport struct {
	// Tokens: the tokens file's tokens now accepted (0: no tokens file).
	Tokens int
	// TLSSerial, TLSNotAfter: the node certificate now in use ("": no TLS).
	TLSSerial, TLSNotAfter string
}

// Reload re-reads the tokens file and the TLS files the node started with.
func (n *Node) Reload() (ReloadReport, error) {
	var rep ReloadReport
	if n.cfg.TokenFile == "" && n.tls == nil {
		return rep, errors.New("reload: the node has no tokens file and no TLS files to reload")
	}
	var tokens []api.Token
	if n.cfg.TokenFile != "" {
		var err error
		if tokens, err = api.LoadTokens(n.cfg.TokenFile); err != nil {
			return rep, fmt.Errorf("reload: %w; nothing changed", err)
		}
		if _, ok := api.OperatorSecret(tokens); !ok {
			return rep, fmt.Errorf("reload: %s has no operator token (the node calls its API with the first one); nothing changed", n.cfg.TokenFile)
		}
	}
	if n.tls != nil {
		// Checked and swapped in one step: a bad file keeps the old.
		if err := n.tls.Reload(); err != nil {
			return rep, fmt.Errorf("reload: %w; nothing changed", err)
		}
		leaf := n.tls.Leaf()
		rep.TLSSerial, rep.TLSNotAfter = leaf.SerialNumber.Text(16), leaf.NotAfter.UTC().Format("2006-01-02T15:04:05Z")
	}
	if tokens != nil {
		if err := n.api.SetTokens(tokens); err != nil {
			return rep, fmt.Errorf("reload: %w", err)
		}
		secret, _ := api.OperatorSecret(tokens)
		n.token.set(secret)
		rep.Tokens = len(tokens)
	}
	n.logger.Info("reloaded", "tokens", rep.Tokens, "tls_serial", rep.TLSSerial, "tls_not_after", rep.TLSNotAfter)
	return rep, nil
}

// ownToken is the token the node calls APIs with, read at each call.
type ownToken struct{ p atomic.Pointer[string] }

func (t *ownToken) set(s string) { t.p.Store(&s) }

func (t *ownToken) get() string {
	if p := t.p.Load(); p != nil {
		return *p
	}
	return ""
}
