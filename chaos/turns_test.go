package chaos

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fak-dev/fak/chaos/checker"
)

func jev(seq uint64, kind, text, data string) checker.JournalEvent {
	e := checker.JournalEvent{Seq: seq, Kind: kind, Text: text}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

// A completed model turn must carry exactly the fake model's reply to its
// own input; interrupted turns are not checked.
func TestModelAnswers(t *testing.T) {
	reply := modelReply("a")
	half := len(reply) / 2
	ok := []checker.JournalEvent{
		jev(1, "input", "a", ""), jev(2, "input", "b", ""),
		jev(3, "turn.started", "", `{"input_seq":1}`), jev(4, "output", reply[:half], ""), jev(5, "output", reply[half:], ""),
		jev(6, "turn.completed", "completed", `{"input_seq":1,"status":"completed"}`),
		jev(7, "turn.started", "", `{"input_seq":2}`), jev(8, "output", "model: b and", ""),
		jev(9, "turn.completed", "interrupted", `{"input_seq":2,"status":"interrupted"}`),
	}
	if n, v := modelAnswers(map[string][]checker.JournalEvent{"s": ok}, []string{"s"}); n != 1 || len(v) != 0 {
		t.Fatalf("checked %d, violations %v", n, v)
	}
	for name, evs := range map[string][]checker.JournalEvent{
		"another input's answer": {jev(1, "input", "a", ""), jev(2, "input", "b", ""),
			jev(3, "turn.started", "", `{"input_seq":2}`), jev(4, "output", reply, ""),
			jev(5, "turn.completed", "completed", `{"input_seq":2,"status":"completed"}`)},
		"streamed twice": {jev(1, "input", "a", ""),
			jev(2, "turn.started", "", `{"input_seq":1}`), jev(3, "output", reply, ""), jev(4, "output", reply, ""),
			jev(5, "turn.completed", "completed", `{"input_seq":1,"status":"completed"}`)},
	} {
		if n, v := modelAnswers(map[string][]checker.JournalEvent{"s": evs}, []string{"s"}); n != 1 || len(v) != 1 {
			t.Errorf("%s: checked %d, violations %v", name, n, v)
		}
	}
}

// The docker fleet reaches the fake model server through a forwarder on
// the network's gateway; here, on loopback.
func TestForwarder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	defer srv.Close()
	f, err := newForwarder("127.0.0.1:0", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 2 {
		res, err := http.Get("http://" + f.Addr() + "/v1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(b) != "hello /v1" {
			t.Fatalf("request %d: %q", i, b)
		}
	}
	if f.accepted.Load() == 0 {
		t.Fatal("the forwarder counted no connection")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + f.Addr() + "/v1"); err == nil {
		t.Fatal("the forwarder still answers after Close")
	}
}

// Where the harness cannot listen on the docker network's gateway (a
// remote engine), the fleet gets no model runtime and the run says why.
func TestModelEndpointDockerGateway(t *testing.T) {
	m := newModelEndpoint()
	defer m.Close()
	if text, err := m.dockerConfig(net.ParseIP("192.0.2.1")); err != nil || text != "" || m.off == "" {
		t.Fatalf("unreachable gateway: config %q, error %v, off %q", text, err, m.off)
	}
	m2 := newModelEndpoint()
	defer m2.Close()
	text, err := m2.dockerConfig(net.ParseIP("127.0.0.1"))
	if err != nil || m2.off != "" || !strings.Contains(text, `endpoint     = "http://`+m2.fwd.Addr()+`/v1"`) || !strings.Contains(text, `adapter      = "model"`) {
		t.Fatalf("config %q, error %v, off %q", text, err, m2.off)
	}
}

func TestModelMoves(t *testing.T) {
	evs := []checker.JournalEvent{
		jev(1, "epoch.changed", "", `{"epoch":1}`),
		jev(2, "move.requested", "", `{"cause":"operator"}`), jev(3, "epoch.changed", "", `{"epoch":2}`),
		jev(4, "move.requested", "", `{"cause":"recovery"}`), jev(5, "epoch.changed", "", `{"epoch":3}`),
	}
	if moves, rec := modelMoves(map[string][]checker.JournalEvent{"s": evs}, []string{"s"}); moves != 2 || rec != 1 {
		t.Fatalf("moves %d, recoveries %d", moves, rec)
	}
}
