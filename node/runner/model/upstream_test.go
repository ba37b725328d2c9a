package model

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{"Retry-After": "-3"}, 0, false},
		{nil, 0, false},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		got, ok := retryAfter(h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v: %s %v, want %s %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

// A Retry-After longer than MaxRetryWait waits MaxRetryWait; without one
// the backoff grows and stays bounded.
func TestRetryWaitIsBounded(t *testing.T) {
	if d := retryWait(&upstreamError{hasAfter: true, retryAfter: time.Hour}, 0); d != MaxRetryWait {
		t.Fatalf("Retry-After 1h waits %s", d)
	}
	for n := range 10 {
		base := min(500*time.Millisecond<<n, 8*time.Second)
		if d := retryWait(&upstreamError{}, n); d < base || d > base+base/4 {
			t.Fatalf("backoff %d: %s, want %s plus at most a quarter", n, d, base)
		}
	}
}

func TestUpstreamMessage(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}`: "Incorrect API key",
		`{"error":"model not loaded"}`:                                             "model not loaded",
		`{"message":"overloaded"}`:                                                 "overloaded",
		`{"detail":"Not Found"}`:                                                   "Not Found",
		"<html>502 Bad Gateway</html>\n":                                           "<html>502 Bad Gateway</html>",
		"":                                                                         "",
	} {
		if got := upstreamMessage([]byte(body)); got != want {
			t.Errorf("%q: %q, want %q", body, got, want)
		}
	}
}

func TestSpendMicros(t *testing.T) {
	p := Price{InputPerMTok: 2.5, OutputPerMTok: 10}
	// 1234 × 2.5 + 567 × 10 = 3085 + 5670.
	if got := spendMicros(p, 1234, 567); got != 8755 {
		t.Fatalf("spend %d µ, want 8755", got)
	}
	if got := spendMicros(Price{}, 1e6, 1e6); got != 0 {
		t.Fatalf("free model costs %d", got)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	good := Options{Name: "gpt", Endpoint: "http://127.0.0.1:1/v1", Model: "m", Tools: []string{ToolShell}}
	for _, tc := range []struct {
		name string
		edit func(*Options)
	}{
		{"no name", func(o *Options) { o.Name = "" }},
		{"bad endpoint", func(o *Options) { o.Endpoint = "127.0.0.1:8080" }},
		{"no model", func(o *Options) { o.Model = "" }},
		{"unknown tool", func(o *Options) { o.Tools = []string{"browser"} }},
		{"approve outside tools", func(o *Options) { o.AutoApprove = []string{ToolReadFile} }},
		{"negative price", func(o *Options) { o.Price.OutputPerMTok = -1 }},
		{"unknown sandbox", func(o *Options) { o.Sandbox = "docker" }},
	} {
		o := good
		tc.edit(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
}
