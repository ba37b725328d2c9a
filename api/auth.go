package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// LoadTokens reads bearer tokens from a file: one per line, blank lines and
// lines starting with # ignored.
func LoadTokens(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	var tokens []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tokens = append(tokens, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("token file %s holds no token", path)
	}
	return tokens, nil
}

// authInterceptor checks the bearer token of every unary and streaming RPC.
// Tokens are compared as SHA-256 digests in constant time and never logged.
type authInterceptor struct {
	digests [][32]byte
}

func newAuthInterceptor(tokens []string) *authInterceptor {
	a := &authInterceptor{}
	for _, t := range tokens {
		a.digests = append(a.digests, sha256.Sum256([]byte(t)))
	}
	return a
}

func (a *authInterceptor) check(h http.Header) error {
	if len(a.digests) == 0 {
		return nil // auth disabled (tests, explicitly configured)
	}
	v := h.Get("Authorization")
	token, ok := strings.CutPrefix(v, "Bearer ")
	if !ok || token == "" {
		return newError(connect.CodeUnauthenticated, &fakv1.ErrorInfo{Reason: ReasonUnauth}, "missing bearer token")
	}
	d := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range a.digests {
		match |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	if match != 1 {
		return newError(connect.CodeUnauthenticated, &fakv1.ErrorInfo{Reason: ReasonUnauth}, "invalid bearer token")
	}
	return nil
}

func (a *authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !req.Spec().IsClient {
			if err := a.check(req.Header()); err != nil {
				return nil, err
			}
		}
		return next(ctx, req)
	}
}

func (a *authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a *authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a.check(conn.RequestHeader()); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
