package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	ready := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/health":
			w.Write([]byte(`{"status":"ok"}`))
		case r.URL.Path == "/v1/health/ready" && ready:
			w.Write([]byte(`{"status":"ready"}`))
		case r.URL.Path == "/v1/health/ready":
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"catching up"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tests := []struct {
		args     []string
		ready    bool
		code     int
		out, err string
	}{
		{[]string{"--addr", srv.URL}, false, 0, `"ok"`, ""},
		{[]string{"--ready", "--addr", srv.URL}, false, 1, "", "HTTP 503"},
		{[]string{"--ready", "--addr", srv.URL}, true, 0, `"ready"`, ""},
		{[]string{"--ready", "--addr", "http://127.0.0.1:1"}, true, 1, "", "fak health:"},
		{[]string{"--addr", "ftp://x"}, true, 2, "", "scheme"},
	}
	for _, tt := range tests {
		ready = tt.ready
		var out, errb bytes.Buffer
		code := run(append([]string{"health"}, tt.args...), &out, &errb)
		if code != tt.code || !strings.Contains(out.String(), tt.out) || !strings.Contains(errb.String(), tt.err) {
			t.Errorf("fak health %v (ready %v): exit %d, stdout %q, stderr %q; want exit %d, %q, %q",
				tt.args, tt.ready, code, out.String(), errb.String(), tt.code, tt.out, tt.err)
		}
	}
}
