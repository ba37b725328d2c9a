package apiclient

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Unary calls go over HTTP/1.1 and streams over HTTP/2, in plaintext (h2c)
// and over TLS (ALPN).
func TestSplitTransportProtocols(t *testing.T) {
	proto := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, r.Proto)
	})
	plain := httptest.NewUnstartedServer(proto)
	plain.Config.Protocols = new(http.Protocols)
	plain.Config.Protocols.SetHTTP1(true)
	plain.Config.Protocols.SetUnencryptedHTTP2(true)
	plain.Start()
	defer plain.Close()
	secure := httptest.NewUnstartedServer(proto)
	secure.EnableHTTP2 = true
	secure.StartTLS()
	defer secure.Close()
	roots := secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	for _, tc := range []struct {
		name string
		url  string
		hc   *http.Client
	}{
		{"h2c", plain.URL, NewHTTPClient()},
		{"tls", secure.URL, NewTLSHTTPClient(&tls.Config{RootCAs: roots}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, call := range []struct{ method, contentType, want string }{
				{"POST", "application/proto", "HTTP/1.1"},
				{"POST", "application/json", "HTTP/1.1"},
				{"GET", "", "HTTP/1.1"},
				{"POST", "application/connect+proto", "HTTP/2.0"},
				{"POST", "application/grpc", "HTTP/2.0"},
				// After a stream, a unary call still goes over HTTP/1.1.
				{"POST", "application/proto", "HTTP/1.1"},
			} {
				req, err := http.NewRequest(call.method, tc.url, strings.NewReader("x"))
				if err != nil {
					t.Fatal(err)
				}
				if call.contentType != "" {
					req.Header.Set("Content-Type", call.contentType)
				}
				resp, err := tc.hc.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", call.method, call.contentType, err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != call.want {
					t.Errorf("%s %s went over %s, want %s", call.method, call.contentType, got, call.want)
				}
			}
			tc.hc.CloseIdleConnections()
		})
	}
}
