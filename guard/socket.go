package guard

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The lifecycle socket: a unix socket in the guard's private run directory.
// A hook sends one JSON line (Request) and reads one JSON line (Reply); the
// guard checks the peer's uid (it must be the guard's own) and the
// per-launch token before it acts.

// Request is what a hook sends.
type Request struct {
	Token    string          `json:"token"`
	Event    string          `json:"event"` // session_start or session_end
	Provider string          `json:"provider,omitempty"`
	Payload  json.RawMessage `json:"payload"` // the provider's hook JSON, verbatim
}

// Reply is the guard's answer.
type Reply struct {
	OK bool `json:"ok"`
	// Action taken: bound, no_op, clear, new, resume, compact, fork, end.
	Action string `json:"action,omitempty"`
	// SessionID is the launch's session in force afterwards.
	SessionID         string `json:"session_id,omitempty"`
	PreviousSessionID string `json:"previous_session_id,omitempty"`
	Error             string `json:"error,omitempty"`
}

// HandlerFunc acts on an authenticated request.
type HandlerFunc func(ctx context.Context, req Request) Reply

const (
	// maxRequestBytes bounds one request line (the hook JSON inside it is
	// usually well under a kilobyte).
	maxRequestBytes = 1 << 20
	maxReplyBytes   = 64 << 10
	// connTimeout bounds a connection on the guard side; the hook gives up
	// sooner (hookTimeout).
	connTimeout = 5 * time.Second
)

// Server serves the lifecycle socket.
type Server struct {
	ln     *net.UnixListener
	token  string
	uid    int
	handle HandlerFunc

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Listen creates the socket at path (mode 0600, in a directory the caller
// made private) for peers of this process's uid holding token.
func Listen(path, token string, handle HandlerFunc) (*Server, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{ln: ln, token: token, uid: os.Getuid(), handle: handle, ctx: ctx, cancel: cancel}, nil
}

// Serve accepts connections until Close.
func (s *Server) Serve() {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
		}()
	}
}

// Close stops accepting, cancels requests in flight and waits for them.
func (s *Server) Close() {
	s.cancel()
	s.ln.Close()
	s.wg.Wait()
}

func (s *Server) serveConn(conn *net.UnixConn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(connTimeout))
	reply := s.answer(conn)
	b, _ := json.Marshal(reply)
	conn.Write(append(b, '\n'))
}

func (s *Server) answer(conn *net.UnixConn) Reply {
	// The request is read before the checks, so the peer is never cut off
	// mid-write and always gets the reply that says why it was refused.
	line, err := readLine(conn, maxRequestBytes)
	uid, uerr := peerUID(conn)
	switch {
	case uerr != nil:
		return Reply{Error: "cannot check the peer's uid: " + uerr.Error()}
	case uid != s.uid:
		return Reply{Error: fmt.Sprintf("peer uid %d is not the guard's uid %d", uid, s.uid)}
	case err != nil:
		return Reply{Error: "reading the request: " + err.Error()}
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Reply{Error: "malformed request"}
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(s.token)) != 1 {
		return Reply{Error: "wrong guard token"}
	}
	return s.handle(s.ctx, req)
}

// Call sends req to the socket at path and returns the guard's reply; ctx
// bounds the whole exchange.
func Call(ctx context.Context, path string, req Request) (Reply, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	b, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	_, werr := conn.Write(append(b, '\n'))
	// Even when the write failed, the guard may have answered why.
	line, err := readLine(conn, maxReplyBytes)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return Reply{}, ctx.Err()
		case werr != nil:
			return Reply{}, werr
		}
		return Reply{}, err
	}
	var reply Reply
	if err := json.Unmarshal(line, &reply); err != nil {
		return Reply{}, errors.New("malformed reply from the guard")
	}
	return reply, nil
}

// readLine reads one newline-terminated line of at most max bytes (a last
// line without its newline counts).
func readLine(r io.Reader, max int) ([]byte, error) {
	br := bufio.NewReader(io.LimitReader(r, int64(max)+1))
	line, err := br.ReadBytes('\n')
	if len(line) > max {
		return nil, fmt.Errorf("line longer than %d bytes", max)
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	return line, nil
}
