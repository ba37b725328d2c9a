package chaos

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fak-dev/fak/node/runner/model/modeltest"
)

// Model sessions in a chaos run (issue 14): every node has a runtime
// "gpt" of fak's own model loop, pointed at a fake OpenAI-compatible
// server in the harness's process (modeltest). The server has each turn
// read and rewrite a witness file in the workspace (workspaces.go), then
// answers with ~24 words streamed at modelTokensPerSecond, so a turn is in
// flight for a good part of the time and kills, pauses and moves cut
// turns in the middle.
const (
	modelRuntime         = "gpt"
	modelName            = "fake-4"
	modelTokensPerSecond = 200
	modelTurnTimeout     = 30 * time.Second
)

// modelFiller pads the fake model's answer to about two dozen words.
var modelFiller = strings.Fields("and that is the whole of it, said slowly enough that a node may die before the last word is out")

// modelReply is the fake model's answer to a turn whose input is input.
func modelReply(input string) string {
	return modeltest.EchoPrefix + input + " " + strings.Join(modelFiller, " ")
}

// modelEndpoint is the fake model server and how the fleet reaches it.
type modelEndpoint struct {
	srv *modeltest.Server
	// url is what the nodes' runtime block names: the server itself in
	// process mode; in docker mode a forwarder on the network's gateway.
	url string
	// off says why the fleet runs no model sessions ("" when it does).
	off string

	fwd *forwarder
}

func newModelEndpoint() *modelEndpoint {
	srv := modeltest.NewServer()
	srv.SetDefault(witnessReply)
	return &modelEndpoint{srv: srv, url: srv.URL}
}

// config is the agent config file every node reads (--config): the model
// runtime block.
func (m *modelEndpoint) config() string {
	return fmt.Sprintf(`runtime %q {
  adapter      = "model"
  endpoint     = %q
  model        = %q
  turn_timeout = %q
  tools        = ["read_file", "write_file"]
  approve      = ["read_file", "write_file"]
}
`, modelRuntime, m.url, modelName, modelTurnTimeout.String())
}

// writeConfig writes config() to path.
func (m *modelEndpoint) writeConfig(path string) error {
	return os.WriteFile(path, []byte(m.config()), 0o644)
}

// dockerConfig is the docker fleet's AgentConfig hook: containers cannot
// reach the harness's loopback, so a forwarder listens on the docker
// network's gateway — the host's own address on that bridge — and the
// runtime block names it. Where the harness cannot listen there (a remote
// Docker engine), the fleet runs without model sessions and says why.
func (m *modelEndpoint) dockerConfig(gateway net.IP) (string, error) {
	target, err := url.Parse(m.srv.URL)
	if err != nil {
		return "", err
	}
	fwd, err := newForwarder(net.JoinHostPort(gateway.String(), "0"), target.Host)
	if err != nil {
		m.off = fmt.Sprintf("the harness cannot listen on the docker network's gateway %s: %v", gateway, err)
		return "", nil
	}
	m.fwd = fwd
	m.url = "http://" + fwd.Addr() + "/v1"
	return m.config(), nil
}

// probeDocker checks that a container really reaches the forwarder (a
// host firewall may drop what comes from the bridge): `fak health` in the
// container asks the forwarder, which counts the connection. Without one
// the model sessions are left out of the run, with the reason.
func (m *modelEndpoint) probeDocker(f *dockerFleet) {
	if m.fwd == nil {
		return
	}
	for attempt := 0; attempt < 3; attempt++ {
		before := m.fwd.accepted.Load()
		_, _ = f.exec(f.nodes[attempt%len(f.nodes)].name, 10*time.Second, "health", "--addr", "http://"+m.fwd.Addr(), "--timeout", "3s")
		if m.fwd.accepted.Load() > before {
			return
		}
	}
	m.off = fmt.Sprintf("no container reached the model endpoint %s on the docker network's gateway", m.fwd.Addr())
}

// Requests is how many requests the fake server has received.
func (m *modelEndpoint) Requests() int { return m.srv.Stats().Requests }

func (m *modelEndpoint) Close() {
	if m.fwd != nil {
		m.fwd.Close()
	}
	m.srv.Close()
}

// forwarder relays TCP connections from a listener to target.
type forwarder struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

func newForwarder(listen, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) Addr() string { return f.ln.Addr().String() }

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.accepted.Add(1)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.relay(c)
		}()
	}
}

// track registers c for Close; false once closed (c is closed then).
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return false
	}
	f.conns[c] = true
	return true
}

func (f *forwarder) relay(c net.Conn) {
	if !f.track(c) {
		return
	}
	defer c.Close()
	u, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		return
	}
	if !f.track(u) {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	<-done
}

// Close stops listening, cuts every relayed connection and waits for the
// relays to end.
func (f *forwarder) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
