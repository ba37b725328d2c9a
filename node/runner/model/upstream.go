package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/fak-dev/fak/node/runner"
)

// Reasons a model turn fails with (turn.completed's "reason").
const (
	ReasonUpstreamAuth        = "UPSTREAM_AUTH"         // 401, 403: the key is missing, wrong or not allowed
	ReasonUpstreamNotFound    = "UPSTREAM_NOT_FOUND"    // 404: usually an unknown model
	ReasonUpstreamRateLimited = "UPSTREAM_RATE_LIMITED" // 429 after the retries
	ReasonUpstreamUnavailable = "UPSTREAM_UNAVAILABLE"  // 5xx or no connection, after the retries
	ReasonUpstreamTimeout     = "UPSTREAM_TIMEOUT"      // the endpoint stayed silent, after the retries
	ReasonUpstreamProtocol    = "UPSTREAM_PROTOCOL"     // a malformed chunk, not an event stream
	ReasonUpstreamStreamCut   = "UPSTREAM_STREAM_CUT"   // the stream ended before its finish_reason or [DONE]
	ReasonUpstreamError       = "UPSTREAM_ERROR"        // any other refusal (400: e.g. a context too long)
	ReasonAccountUnresolved   = "ACCOUNT_UNRESOLVED"    // this node cannot find the account's key
	ReasonTurnTimeout         = "TURN_TIMEOUT"
	ReasonMaxSteps            = "MAX_STEPS"
	ReasonBadContext          = "BAD_CONTEXT" // the journal cannot be turned into messages
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

var (
	errStalled = errors.New("stalled")
	errCut     = errors.New("the stream ended without a finish_reason and data: [DONE]")
)

// exchange is what the runtime sees of one HTTP exchange below the SDK:
// the status, headers and error body (the SDK keeps neither for a body
// that is not the OpenAI error shape), whether data: [DONE] went by (the
// SDK ends a stream the same way at [DONE] and at a premature end), and
// every read of the body, which keeps the stall timer from firing.
type exchange struct {
	alive   func()
	status  int
	header  http.Header
	body    []byte
	done    bool
	badType string
}

func (x *exchange) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil {
		return res, err
	}
	x.alive()
	x.status, x.header = res.StatusCode, res.Header
	if res.StatusCode >= 400 {
		x.body, _ = io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		_ = res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(x.body))
		return res, nil
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "text/event-stream" {
		x.badType = res.Header.Get("Content-Type")
		_ = res.Body.Close()
		return nil, errNotStream
	}
	res.Body = &watchedBody{rc: res.Body, x: x}
	return res, nil
}

var errNotStream = errors.New("not an event stream")

// watchedBody reports reads as signs of life and spots the data: [DONE]
// line.
type watchedBody struct {
	rc   io.ReadCloser
	x    *exchange
	line []byte // the start of the current line, up to len(doneLine)+1 bytes
}

var doneLine = []byte("data: [DONE]")

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.x.alive()
		for _, c := range p[:n] {
			if c == '\n' || c == '\r' {
				if l := bytes.TrimRight(b.line, " "); bytes.Equal(l, doneLine) || bytes.Equal(l, []byte("data:[DONE]")) {
					b.x.done = true
				}
				b.line = b.line[:0]
			} else if len(b.line) <= len(doneLine) {
				b.line = append(b.line, c)
			}
		}
	}
	return n, err
}

func (b *watchedBody) Close() error { return b.rc.Close() }

// upstreamError is a failed model call: why, whether another attempt may
// fare better, and how long the endpoint asked to wait first.
type upstreamError struct {
	reason     string
	msg        string
	retryable  bool
	retryAfter time.Duration
	hasAfter   bool
}

func (e *upstreamError) Error() string { return e.reason + ": " + e.msg }

// turnError is e as the turn's failure, saying how many attempts were made.
func (e *upstreamError) turnError(attempts int) error {
	if attempts > 1 {
		return runner.Failf(e.reason, "%s (after %d attempts)", e.msg, attempts)
	}
	return runner.Failf(e.reason, "%s", e.msg)
}

// classify turns what a failed call left behind into an upstreamError.
// callCtx is the call's own context (cancelled by the stall timer).
func classify(callCtx context.Context, x *exchange, err error, stall time.Duration) *upstreamError {
	var se *ssestream.StreamError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(context.Cause(callCtx), errStalled):
		return &upstreamError{reason: ReasonUpstreamTimeout, retryable: true,
			msg: fmt.Sprintf("the endpoint sent nothing for %s", stall)}
	case x.status >= 400:
		return statusError(x)
	case x.badType != "":
		return &upstreamError{reason: ReasonUpstreamProtocol,
			msg: fmt.Sprintf("%d: the endpoint answered with Content-Type %q, not an event stream", x.status, x.badType)}
	case errors.As(err, &syn), errors.As(err, &typ):
		return &upstreamError{reason: ReasonUpstreamProtocol, msg: "malformed chunk: " + err.Error()}
	case errors.As(err, &se):
		return &upstreamError{reason: ReasonUpstreamError, msg: se.Message}
	case x.status != 0 && (errors.Is(err, errCut) || errors.Is(err, io.ErrUnexpectedEOF) || !isTimeout(err)):
		// The response had begun: whatever broke it, the stream is cut.
		msg := errCut.Error()
		if !errors.Is(err, errCut) {
			msg = "the stream broke off: " + err.Error()
		}
		return &upstreamError{reason: ReasonUpstreamStreamCut, retryable: true, msg: msg}
	case isTimeout(err):
		return &upstreamError{reason: ReasonUpstreamTimeout, retryable: true, msg: err.Error()}
	default: // no response: refused, reset, unreachable
		return &upstreamError{reason: ReasonUpstreamUnavailable, retryable: true, msg: err.Error()}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// statusError reads an error status: the reason it maps to, whether it
// is worth retrying, and Retry-After.
func statusError(x *exchange) *upstreamError {
	e := &upstreamError{msg: strconv.Itoa(x.status) + " " + http.StatusText(x.status)}
	if m := upstreamMessage(x.body); m != "" {
		e.msg += ": " + m
	}
	switch {
	case x.status == http.StatusUnauthorized, x.status == http.StatusForbidden:
		e.reason = ReasonUpstreamAuth
	case x.status == http.StatusNotFound:
		e.reason = ReasonUpstreamNotFound
	case x.status == http.StatusTooManyRequests:
		e.reason, e.retryable = ReasonUpstreamRateLimited, true
	case x.status == http.StatusRequestTimeout:
		e.reason, e.retryable = ReasonUpstreamTimeout, true
	case x.status >= 500:
		e.reason, e.retryable = ReasonUpstreamUnavailable, true
	default:
		e.reason = ReasonUpstreamError
	}
	e.retryAfter, e.hasAfter = retryAfter(x.header, time.Now())
	return e
}

// upstreamMessage finds the message of an error body: OpenAI's
// {"error":{"message":...}}, the shapes other servers use, or the text.
func upstreamMessage(body []byte) string {
	var b struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &b) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(b.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(b.Error, &s) == nil && s != "":
			return s
		case b.Message != "":
			return b.Message
		case json.Unmarshal(b.Detail, &s) == nil && s != "":
			return s
		}
	}
	text := strings.ToValidUTF8(strings.TrimSpace(string(body)), "\uFFFD")
	if len(text) > 300 {
		text = strings.ToValidUTF8(text[:300], "") + "…"
	}
	return text
}

// retryAfter reads how long the endpoint asks to wait: retry-after-ms
// (OpenAI's), then Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// retryWait is how long to wait before attempt n+1 (n from 0): what the
// endpoint asked for, else an exponential backoff with jitter; never more
// than MaxRetryWait.
func retryWait(e *upstreamError, n int) time.Duration {
	if e.hasAfter {
		return min(e.retryAfter, MaxRetryWait)
	}
	d := min(500*time.Millisecond<<n, 8*time.Second)
	return min(d+rand.N(d/4+1), MaxRetryWait)
}
