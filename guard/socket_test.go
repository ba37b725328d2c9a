package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// shortDir is a temporary directory whose paths fit a unix socket's limit.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fakg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// recorder is a HandlerFunc that remembers what reached it.
type recorder struct {
	mu    sync.Mutex
	reqs  []Request
	reply Reply
}

func (r *recorder) handle(_ context.Context, req Request) Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return r.reply
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func startServer(t *testing.T, token string, h HandlerFunc) (*Server, string) {
	t.Helper()
	path := filepath.Join(shortDir(t), "g.sock")
	srv, err := Listen(path, token, h)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(srv.Close)
	return srv, path
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSocketRoundTrip(t *testing.T) {
	rec := &recorder{reply: Reply{OK: true, Action: "clear", SessionID: "ses_b", PreviousSessionID: "ses_a"}}
	_, path := startServer(t, "tok", rec.handle)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %v mode %v, want a 0600 socket", err, fi.Mode())
	}
	reply, err := Call(testCtx(t), path, Request{Token: "tok", Event: EventSessionStart, Provider: "claude", Payload: json.RawMessage(claudeClear)})
	if err != nil {
		t.Fatal(err)
	}
	if reply != rec.reply {
		t.Fatalf("reply = %+v, want %+v", reply, rec.reply)
	}
	if rec.count() != 1 || rec.reqs[0].Provider != "claude" || !bytes.Equal(rec.reqs[0].Payload, []byte(claudeClear)) {
		t.Fatalf("handler got %+v", rec.reqs)
	}
}

func TestSocketRejectsAWrongToken(t *testing.T) {
	rec := &recorder{reply: Reply{OK: true}}
	_, path := startServer(t, "right", rec.handle)
	for _, token := range []string{"wrong", "", "righ", "right "} {
		reply, err := Call(testCtx(t), path, Request{Token: token, Event: EventSessionStart, Payload: json.RawMessage(claudeClear)})
		if err != nil {
			t.Fatal(err)
		}
		if reply.OK || reply.Error != "wrong guard token" {
			t.Fatalf("token %q: reply %+v", token, reply)
		}
	}
	if rec.count() != 0 {
		t.Fatalf("the handler ran %d times for unauthenticated requests", rec.count())
	}
}

func TestSocketRejectsAnotherUID(t *testing.T) {
	rec := &recorder{reply: Reply{OK: true}}
	path := filepath.Join(shortDir(t), "u.sock")
	srv, err := Listen(path, "tok", rec.handle)
	if err != nil {
		t.Fatal(err)
	}
	// The peer is this process; pretend the guard runs as someone else.
	srv.uid = os.Getuid() + 1
	go srv.Serve()
	defer srv.Close()
	reply, err := Call(testCtx(t), path, Request{Token: "tok", Event: EventSessionStart, Payload: json.RawMessage(claudeClear)})
	if err != nil {
		t.Fatal(err)
	}
	if reply.OK || !strings.Contains(reply.Error, "peer uid") {
		t.Fatalf("reply = %+v, want a peer uid refusal", reply)
	}
	if rec.count() != 0 {
		t.Fatal("the handler ran for a peer of another uid")
	}
}

func TestPeerUIDIsTheCaller(t *testing.T) {
	path := filepath.Join(shortDir(t), "p.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", path)
		if err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	conn, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	uid, err := peerUID(conn)
	if err != nil || uid != os.Getuid() {
		t.Fatalf("peerUID = %d, %v; want %d", uid, err, os.Getuid())
	}
}

func TestSocketMalformedAndOversizedRequests(t *testing.T) {
	rec := &recorder{reply: Reply{OK: true}}
	_, path := startServer(t, "tok", rec.handle)
	for _, line := range []string{"not json\n", strings.Repeat("x", maxRequestBytes+10) + "\n"} {
		conn, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		go conn.Write([]byte(line))
		got, err := readLine(conn, maxReplyBytes)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		var reply Reply
		if json.Unmarshal(got, &reply) != nil || reply.OK || reply.Error == "" {
			t.Fatalf("reply to a bad request: %s", got)
		}
	}
	if rec.count() != 0 {
		t.Fatal("the handler ran for a bad request")
	}
}
