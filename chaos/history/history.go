// Package history records what chaos clients asked of a fak fleet and what
// they were told, in the shape the checkers read: one Op per logical
// operation, with invocation and completion times on one monotonic clock.
package history

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind string

const (
	// Append adds one event to a session's journal. With CAS set it is a
	// compare-and-append: it succeeds only when the journal head equals
	// ExpectedSeq.
	Append Kind = "append"
	// Read returns the whole journal of a session (linearizable read).
	Read Kind = "read"
	// Watch is what a watch stream delivered: a run of consecutive events,
	// FromSeq..HeadSeq, from whichever node served it. Only the address
	// checker reads watches: each observed address must keep its event.
	Watch Kind = "watch"
)

// Outcome is what the client learned.
type Outcome string

const (
	// OK: the operation took effect (append) or returned data (read).
	OK Outcome = "ok"
	// Fail: the operation certainly did not take effect. A CAS append that
	// lost the compare is a Fail with Mismatch set and HeadSeq observed.
	Fail Outcome = "fail"
	// Info: the outcome is unknown (timeout, connection lost mid-call,
	// leadership lost): it may or may not have taken effect.
	Info Outcome = "info"
)

// Op is one logical operation. Retries of the same request (same
// RequestID) are folded into one Op spanning first call to last return.
type Op struct {
	// Client is the logical client. A client never has two operations
	// outstanding; after an Info outcome the worker continues under a new
	// client id, as porcupine requires.
	Client  int    `json:"client"`
	Session string `json:"session"`
	Kind    Kind   `json:"kind"`

	// Append input.
	Value       string `json:"value,omitempty"` // unique payload
	CAS         bool   `json:"cas,omitempty"`
	ExpectedSeq uint64 `json:"expected_seq,omitempty"`
	RequestID   string `json:"request_id,omitempty"`

	Outcome Outcome `json:"outcome"`
	// Append output: the seq the event got (OK), or the head reported with
	// a CAS mismatch (Fail + Mismatch).
	Seq      uint64 `json:"seq,omitempty"`
	Mismatch bool   `json:"mismatch,omitempty"`
	HeadSeq  uint64 `json:"head_seq,omitempty"`
	// Read output: the payloads of the journal's client events in seq order,
	// their seqs, and the head (HeadSeq) the read ended at.
	Values []string `json:"values,omitempty"`
	Seqs   []uint64 `json:"seqs,omitempty"`
	// Read and watch output: the identity (checker.RangeDigest) of every
	// event observed, seqs FromSeq..HeadSeq (a read starts at 1).
	FromSeq uint64 `json:"from_seq,omitempty"`
	Digest  string `json:"digest,omitempty"`
	Error   string `json:"error,omitempty"`
	Node    string `json:"node,omitempty"` // which node the client called (last attempt)

	// Call and Return are nanoseconds since the recorder started. Return
	// is meaningless when Outcome is Info (the op may complete any time).
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
}

// Recorder collects operations from many goroutines.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder starts the clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Start is the instant Now measures from.
func (r *Recorder) Start() time.Time { return r.start }

// Now is nanoseconds since the recorder started (monotonic clock).
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add records a finished operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of the history sorted by call time.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Encode stores a history as JSON lines.
func Encode(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile stores a history as a JSON-lines file.
func WriteFile(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Encode(f, ops); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Decode loads a JSON-lines history.
func Decode(r io.Reader) ([]Op, error) {
	dec := json.NewDecoder(r)
	var ops []Op
	for dec.More() {
		var op Op
		if err := dec.Decode(&op); err != nil {
			return nil, fmt.Errorf("history entry %d: %w", len(ops)+1, err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}
