package node_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/testcluster"
)

// repeatReader yields n bytes of b.
type repeatReader struct {
	n, read int64
	b       byte
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.read >= r.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n-r.read)
	for i := range p[:k] {
		p[i] = r.b
	}
	r.read += k
	return int(k), nil
}

// A node answers malformed, oversized and hostile requests with a clear
// error — a bad protobuf, a 100 MB body, JSON nested 100,000 deep — and
// keeps serving others meanwhile; a client that sends its headers slowly
// (slowloris) holds no more than a connection, and only until the header
// timeout.
func TestHostileRequestsAreRefusedAndOthersServed(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	n := c.Nodes[0]
	id := createSession(t, c, n, "hostile")
	base := "http://" + n.APIAddr
	post := func(path, contentType string, body io.Reader) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxT(t, 30*time.Second), http.MethodPost, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+testcluster.Token)
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	served := func(what string) {
		t.Helper()
		if _, err := appendText(ctxT(t, 10*time.Second), c, n, id, "still served after "+what); err != nil {
			t.Fatalf("after %s the node does not serve: %v", what, err)
		}
	}
	const appendPath = "/fak.v1.SessionService/AppendEvents"

	code, body := post(appendPath, "application/proto", bytes.NewReader([]byte{0xff, 0xff, 0xff, 0x0f, 0x08}))
	if code != http.StatusBadRequest || !strings.Contains(body, "invalid_argument") {
		t.Fatalf("bad protobuf: %d %s", code, body)
	}
	served("a bad protobuf")

	big := &repeatReader{n: 100 << 20, b: 'a'}
	code, body = post(appendPath, "application/json", big)
	if code == http.StatusOK || !strings.Contains(body, "resource_exhausted") {
		t.Fatalf("100 MB body: %d %s", code, body)
	}
	served("a 100 MB body")

	deep := strings.Repeat(`{"events":[`, 1) + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "]}"
	code, body = post(appendPath, "application/json", strings.NewReader(deep))
	if code != http.StatusBadRequest || !strings.Contains(body, "invalid_argument") {
		t.Fatalf("deep JSON: %d %.200s", code, body)
	}
	served("JSON nested 100,000 deep")

	// Slowloris: a header line every 200 ms. Other clients are served
	// meanwhile, and the node closes the connection at its header timeout.
	conn, err := net.Dial("tcp", n.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(conn, "POST "+appendPath+" HTTP/1.1\r\nHost: x\r\n")
		for i := 0; err == nil; i++ {
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(200 * time.Millisecond):
			}
			_, err = io.WriteString(conn, "X-Slow-"+strings.Repeat("a", i%8+1)+": 1\r\n")
		}
		done <- err
	}()
	served("a slow client's first header lines")
	deadline := time.After(30 * time.Second)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("slowloris writer stopped without an error")
		}
	case <-deadline:
		close(stop)
		t.Fatal("the node kept a connection whose headers never ended for 30 s")
	}
	served("a slowloris connection")
}
