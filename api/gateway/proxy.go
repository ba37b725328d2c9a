package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// maxRequestBody bounds a model call's request (a long context is a few
// MB; a metered request is read whole to see its model and stream flag).
const maxRequestBody = 64 << 20

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute, // a model may think before its first byte
	}
}

// callerKey is the credential the caller sent the way its provider's
// clients send an API key.
func callerKey(provider string, r *http.Request) string {
	switch provider {
	case Anthropic:
		if k := r.Header.Get("X-Api-Key"); k != "" {
			return k
		}
	case Gemini:
		if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
			return k
		}
		if k := r.URL.Query().Get("key"); k != "" {
			return k
		}
	}
	b, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return b
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, err := parseRoute(r.URL.Path)
	if err != nil {
		h.refuse(w, "", Refusef(http.StatusNotFound, "NOT_FOUND",
			"no gateway route %s; use /gateway/anthropic/…, /gateway/openai/… or /gateway/gemini/…", r.URL.Path))
		return
	}
	own := callerKey(rt.provider, r)
	fakToken := r.Header.Get(HeaderFakToken)
	if fakToken == "" {
		fakToken, own = own, "" // the provider header carried fak's token
	}
	if h.o.Authorize != nil {
		if err := h.o.Authorize(fakToken); err != nil {
			// A known token whose role may not call (a read token) is a
			// *Refusal, 403; anything else is 401.
			var ref *Refusal
			if !errors.As(err, &ref) {
				ref = Refusef(http.StatusUnauthorized, "UNAUTHENTICATED", "%v", err)
			}
			h.refuse(w, rt.provider, ref)
			return
		}
	}
	acct, ok := h.account(rt.provider, r.Header.Get(HeaderAccount))
	if !ok {
		h.refuse(w, rt.provider, Refusef(http.StatusServiceUnavailable, "NO_ACCOUNT",
			"this node has no %s account%s; add account \"NAME\" { provider = %q  upstream = \"…\" }", rt.provider, named(r.Header.Get(HeaderAccount)), rt.provider))
		return
	}
	// The upstream's credential: the caller's own with pass_through, else
	// the account's; none for an account without a key (a local server).
	key := own
	if !acct.PassThrough {
		key = ""
	}
	if key == "" && acct.Key != nil {
		if key, err = acct.Key(); err != nil {
			h.refuse(w, rt.provider, Refusef(http.StatusServiceUnavailable, "NO_CREDENTIAL", "%v", err))
			return
		}
	}
	if !rt.metered(r.Method) {
		h.forward(w, r, rt, acct, key, r.Body, nil)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil || len(body) > maxRequestBody {
		h.refuse(w, rt.provider, Refusef(http.StatusBadRequest, "INVALID_ARGUMENT", "request body unreadable or over %d bytes", maxRequestBody))
		return
	}
	call := Call{Provider: rt.provider, Account: acct.Name, TraceID: r.Header.Get(HeaderTraceID), LaunchID: cmpOr(r.Header.Get(HeaderLaunch), rt.launch)}
	adm, err := h.o.Meter.Admit(r.Context(), call)
	if err != nil {
		var ref *Refusal
		if !errors.As(err, &ref) {
			ref = Refusef(http.StatusServiceUnavailable, "UNAVAILABLE", "%v", err)
		}
		h.refuse(w, rt.provider, ref)
		return
	}
	if rt.provider == OpenAI && rt.rest == "/v1/chat/completions" {
		body = askForUsage(body)
	}
	h.forward(w, r, rt, acct, key, bytes.NewReader(body), &adm)
}

// refuse answers a call the gateway will not pass, and counts it.
func (h *Handler) refuse(w http.ResponseWriter, provider string, r *Refusal) {
	outcome := OutcomeRefused
	if r.Reason == "UPSTREAM_ERROR" {
		outcome = OutcomeUpstreamError
	}
	label := provider
	if label == "" {
		label = "unknown" // no route: no provider
	}
	h.observe(label, outcome, Usage{})
	writeRefusal(w, provider, r)
}

func named(n string) string {
	if n == "" {
		return ""
	}
	return " named " + n
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// askForUsage adds stream_options.include_usage to a streamed Chat
// Completions request that lacks it: without it the stream reports no
// usage at all. (The client then sees one more chunk, with empty choices,
// which OpenAI's clients expect.)
func askForUsage(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || string(m["stream"]) != "true" {
		return body
	}
	var so map[string]json.RawMessage
	if raw, ok := m["stream_options"]; ok && json.Unmarshal(raw, &so) != nil {
		return body
	}
	if so == nil {
		so = map[string]json.RawMessage{}
	}
	if string(so["include_usage"]) == "true" {
		return body
	}
	so["include_usage"] = json.RawMessage("true")
	m["stream_options"], _ = json.Marshal(so)
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// hopHeaders are not forwarded (RFC 9110 §7.6.1), nor are fak's own and
// the caller's credentials (the account's replace them).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Accept-Encoding", "Host",
	"Authorization", "X-Api-Key", "X-Goog-Api-Key", HeaderTraceID, HeaderLaunch, HeaderAccount, HeaderFakToken}

// forward sends the call upstream and streams the answer back. A metered
// call (adm) is charged what the answer reported once it ends, however
// it ends; an upstream failure is passed through and charged nothing.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, rt route, acct Account, key string, body io.Reader, adm *Admission) {
	q := r.URL.Query()
	q.Del("key")
	target := strings.TrimSuffix(acct.Upstream, "/") + rt.rest
	if enc := q.Encode(); enc != "" {
		target += "?" + enc
	}
	up, err := http.NewRequestWithContext(r.Context(), r.Method, target, body)
	if err != nil {
		h.refuse(w, rt.provider, Refusef(http.StatusBadGateway, "UPSTREAM_ERROR", "%v", err))
		return
	}
	up.Header = r.Header.Clone()
	for _, k := range hopHeaders {
		up.Header.Del(k)
	}
	switch {
	case key == "":
	case rt.provider == Anthropic:
		up.Header.Set("X-Api-Key", key)
	case rt.provider == Gemini:
		up.Header.Set("X-Goog-Api-Key", key)
	default:
		up.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := h.o.Client.Do(up)
	if err != nil {
		if r.Context().Err() == nil {
			h.o.Logger.Warn("gateway: upstream unreachable", "provider", rt.provider, "account", acct.Name, "error", err)
			h.refuse(w, rt.provider, Refusef(http.StatusBadGateway, "UPSTREAM_ERROR", "upstream %s: %v", acct.Upstream, err))
		}
		return
	}
	defer resp.Body.Close()
	settle := adm != nil && resp.StatusCode < 300
	for k, vs := range resp.Header {
		// A metered answer goes without its length: its end (the last
		// chunk, END_STREAM) is sent when the handler returns, after the
		// charge settled, not when the last body byte is.
		if k == "Content-Length" && (resp.Uncompressed || settle) {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	var meter usageReader
	if adm != nil && resp.StatusCode < 300 {
		meter = readerFor(rt, resp.Header.Get("Content-Type"))
	}
	copyStream(w, resp.Body, meter)
	switch {
	case adm == nil:
		h.observe(rt.provider, OutcomeUnmetered, Usage{})
		return
	case meter == nil:
		h.observe(rt.provider, OutcomeUpstreamError, Usage{})
		return // a failure: charged nothing
	}
	u := meter.Usage()
	h.observe(rt.provider, OutcomeCharged, u)
	usage := h.o.Prices.Budget(u)
	if adm.Prepaid {
		usage.Queries = 0
	}
	reqID := ""
	if h.o.NewRequestID != nil {
		reqID = h.o.NewRequestID()
	}
	// The answer ends once its charge is committed (bounded by
	// SettleWait): a client that sends its next call after this one ended
	// is admitted, through any node, on a state holding this charge
	// (issue 32). Past SettleWait (no leader) the charge goes on in the
	// background and the answer ends.
	done := make(chan struct{})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(done)
		h.o.Meter.Charge(*adm, usage, reqID)
	}()
	t := time.NewTimer(h.settleWait())
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-r.Context().Done():
	}
}

// readerFor picks the usage reader of a call's answer.
func readerFor(rt route, contentType string) usageReader {
	sse := strings.HasPrefix(contentType, "text/event-stream")
	switch {
	case rt.provider == Anthropic && sse:
		return newAnthropicStream()
	case rt.provider == Anthropic:
		return &bodyReader{parse: anthropicBody}
	case rt.provider == Gemini && sse:
		return newGeminiSSE()
	case rt.provider == Gemini:
		return &bodyReader{parse: geminiBody}
	case rt.rest == "/v1/responses" && sse:
		return newResponsesStream()
	case rt.rest == "/v1/responses":
		return &bodyReader{parse: responsesBody}
	case sse:
		return newChatStream()
	}
	return &bodyReader{parse: chatBody}
}

// copyStream copies the answer to the client as it arrives, flushing
// every read, and shows every byte to meter. It stops at the end of the
// answer, an upstream error or the client going away.
func copyStream(w http.ResponseWriter, body io.Reader, meter usageReader) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if meter != nil {
				_, _ = meter.Write(buf[:n])
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
