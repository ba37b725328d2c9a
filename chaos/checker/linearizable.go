package checker

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fak-dev/fak/chaos/history"
)

// Verdict is the outcome of a linearizability check.
type Verdict string

const (
	// Ok: every session has a linearization.
	Ok Verdict = "ok"
	// Illegal: at least one session has no linearization.
	Illegal Verdict = "illegal"
	// Unknown: no session was found illegal, but at least one was not
	// decided before the timeout.
	Unknown Verdict = "unknown"
)

// DefaultTimeout is the check budget used when Options.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Options tunes Linearizable.
type Options struct {
	// Timeout bounds the whole check, all sessions together. Sessions not
	// decided in time are Unknown. Zero means DefaultTimeout. When
	// several sessions are illegal and VisualizePath is set, rendering them
	// into one file takes a second check of those sessions, bounded by
	// another Timeout.
	Timeout time.Duration
	// VisualizePath, if set, is where porcupine's HTML visualization of the
	// illegal sessions is written when the verdict is Illegal.
	VisualizePath string
	// Parallelism is how many sessions are checked at once. Zero means
	// GOMAXPROCS.
	Parallelism int
	// Others gives, per session, the seqs of the final journal that hold
	// events the fleet wrote itself (Journal.Others): the model lets them
	// appear at any time, in address order. A session without an entry
	// holds workload values only.
	Others map[string][]uint64

	// recorded checks Info appends over their recorded window [Call, ∞)
	// instead of the window narrowed by infoWindows. Tests use it to show
	// that narrowing does not change verdicts.
	recorded bool
}

// SessionResult is the verdict and counts for one session.
type SessionResult struct {
	Session string
	Verdict Verdict
	// Checked is the number of operations given to porcupine, made up of
	// Appends + Mismatches + Infos + Reads.
	Checked    int
	Appends    int // OK appends
	Mismatches int // CAS appends that failed with an observed head
	Infos      int // appends with unknown outcome
	Reads      int // OK reads
	// Dropped is the number of operations that observed nothing and are not
	// checked: Fail appends without Mismatch, and Info and Fail reads.
	Dropped int
	// Linearized is the length of the longest linearizable prefix
	// porcupine found. It equals Checked when the verdict is Ok.
	Linearized int
	Elapsed    time.Duration
}

// Result is the outcome of Linearizable.
type Result struct {
	Verdict Verdict
	// Sessions has one entry per session in the history, sorted by id.
	Sessions        []SessionResult
	IllegalSessions []string // sorted
	UnknownSessions []string // sorted
	// Ops is the size of the history. Checked + Dropped == Ops.
	Ops     int
	Checked int
	Dropped int
	Infos   int
	// Problems lists malformed operations, such as an OK append without a
	// seq or a value appended twice. The text of each says how it was
	// handled.
	Problems []string
	Timeout  time.Duration
	Elapsed  time.Duration
	// Visualization is the file written for an Illegal verdict ("" if
	// none). VisualizeErr is set if writing it failed.
	Visualization string
	VisualizeErr  error
}

// Ok reports whether the verdict is Ok.
func (r Result) Ok() bool { return r.Verdict == Ok }

type sessionCheck struct {
	ops  []porcupine.Operation
	res  SessionResult
	info porcupine.LinearizationInfo // kept for illegal sessions only
}

// Linearizable checks a history against the journal model, one porcupine
// partition per session. See the package documentation for how each outcome
// is modelled.
func Linearizable(ops []history.Op, opts Options) Result {
	start := time.Now()
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	sessions, problems := convert(ops, opts)
	deadline := start.Add(opts.Timeout)

	work := make(chan *sessionCheck)
	var wg sync.WaitGroup
	for range min(opts.Parallelism, len(sessions)) {
		wg.Go(func() {
			for s := range work {
				s.check(deadline)
			}
		})
	}
	for _, s := range sessions {
		work <- s
	}
	close(work)
	wg.Wait()

	r := Result{Verdict: Ok, Ops: len(ops), Problems: problems, Timeout: opts.Timeout}
	var illegal []*sessionCheck
	for _, s := range sessions {
		r.Sessions = append(r.Sessions, s.res)
		r.Checked += s.res.Checked
		r.Dropped += s.res.Dropped
		r.Infos += s.res.Infos
		switch s.res.Verdict {
		case Illegal:
			r.IllegalSessions = append(r.IllegalSessions, s.res.Session)
			illegal = append(illegal, s)
		case Unknown:
			r.UnknownSessions = append(r.UnknownSessions, s.res.Session)
		}
	}
	switch {
	case len(r.IllegalSessions) > 0:
		r.Verdict = Illegal
	case len(r.UnknownSessions) > 0:
		r.Verdict = Unknown
	}
	if len(illegal) > 0 && opts.VisualizePath != "" {
		r.VisualizeErr = visualize(illegal, opts)
		if r.VisualizeErr == nil {
			r.Visualization = opts.VisualizePath
		}
	}
	r.Elapsed = time.Since(start)
	return r
}

// check runs porcupine on one session with whatever time is left.
func (s *sessionCheck) check(deadline time.Time) {
	t0 := time.Now()
	defer func() { s.res.Elapsed = time.Since(t0) }()
	if len(s.ops) == 0 {
		s.res.Verdict = Ok
		return
	}
	left := time.Until(deadline)
	if left <= 0 {
		s.res.Verdict = Unknown
		return
	}
	verdict, info := porcupine.CheckOperationsVerbose(model, s.ops, left)
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			s.res.Linearized = max(s.res.Linearized, len(lin))
		}
	}
	switch verdict {
	case porcupine.Ok:
		s.res.Verdict = Ok
	case porcupine.Illegal:
		s.res.Verdict = Illegal
		s.info = info
	default:
		s.res.Verdict = Unknown
	}
}

// visualize writes the illegal sessions to opts.VisualizePath. A single
// session reuses its check. Several sessions are checked again together so
// that they share one file.
func visualize(illegal []*sessionCheck, opts Options) error {
	info := illegal[0].info
	if len(illegal) > 1 {
		var all []porcupine.Operation
		for _, s := range illegal {
			all = append(all, s.ops...)
		}
		all = denseClients(all)
		_, info = porcupine.CheckOperationsVerbose(model, all, opts.Timeout)
	}
	if err := porcupine.VisualizePath(model, info, opts.VisualizePath); err != nil {
		return fmt.Errorf("checker: write visualization: %w", err)
	}
	return nil
}

// convert turns a history into porcupine operations grouped by session,
// sorted by session id. Operations that observed nothing are counted but left
// out.
func convert(ops []history.Op, opts Options) ([]*sessionCheck, []string) {
	var problems []string
	by := map[string]*sessionCheck{}
	appended := map[string]map[string]int{} // session → value → history index
	fleet := map[string]others{}
	for id, seqs := range opts.Others {
		set := make(others, len(seqs))
		for _, q := range seqs {
			set[q] = true
		}
		fleet[id] = set
	}
	var windows map[int]interval
	if !opts.recorded {
		windows = infoWindows(ops)
	}
	for idx := range ops {
		op := &ops[idx]
		s := by[op.Session]
		if s == nil {
			s = &sessionCheck{res: SessionResult{Session: op.Session}}
			by[op.Session] = s
			appended[op.Session] = map[string]int{}
		}
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("history[%d] (session %q, client %d, %s %s): ",
				idx, op.Session, op.Client, op.Kind, op.Outcome)+fmt.Sprintf(format, args...))
		}
		call, ret := op.Call, op.Return
		var seqs []uint64
		switch op.Kind {
		case history.Append:
			if prev, dup := appended[op.Session][op.Value]; dup {
				bad("value %q was already appended by history[%d]; values should be unique", op.Value, prev)
			} else {
				appended[op.Session][op.Value] = idx
			}
			switch op.Outcome {
			case history.OK:
				if op.Seq == 0 {
					bad("OK append without a seq; checked as is (it cannot linearize)")
				}
				s.res.Appends++
			case history.Fail:
				if !op.Mismatch {
					s.res.Dropped++
					continue
				}
				if !op.CAS {
					bad("mismatch on an unconditional append; dropped")
					s.res.Dropped++
					continue
				}
				s.res.Mismatches++
			case history.Info:
				call, ret = op.Call, infinity
				if w, ok := windows[idx]; ok {
					call, ret = w.call, w.ret
				}
				s.res.Infos++
			default:
				bad("unknown outcome; dropped")
				s.res.Dropped++
				continue
			}
		case history.Watch:
			s.res.Dropped++ // the address checker's
			continue
		case history.Read:
			switch op.Outcome {
			case history.OK:
				s.res.Reads++
				if op.Digest != "" { // recorded with addresses
					seqs = append([]uint64{}, op.Seqs...)
				}
			case history.Fail, history.Info:
				s.res.Dropped++
				continue
			default:
				bad("unknown outcome; dropped")
				s.res.Dropped++
				continue
			}
		default:
			bad("unknown kind; dropped")
			s.res.Dropped++
			continue
		}
		if ret < call {
			bad("returns at %d, before its call at %d; treated as returning at its call", ret, call)
			ret = call
		}
		s.res.Checked++
		s.ops = append(s.ops, porcupine.Operation{
			ClientId: op.Client,
			Input: &input{
				session:  op.Session,
				kind:     op.Kind,
				value:    op.Value,
				cas:      op.CAS,
				expected: op.ExpectedSeq,
				others:   fleet[op.Session],
			},
			Call: call,
			Output: &output{
				outcome:  op.Outcome,
				seq:      op.Seq,
				mismatch: op.Mismatch,
				head:     op.HeadSeq,
				values:   op.Values,
				seqs:     seqs,
			},
			Return:   ret,
			Metadata: &meta{index: idx, op: op},
		})
	}
	out := make([]*sessionCheck, 0, len(by))
	for _, s := range by {
		s.ops = denseClients(s.ops)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].res.Session < out[j].res.Session })
	return out, problems
}

type sessionValue struct{ session, value string }

// interval is the window in which an operation can take effect.
type interval struct{ call, ret int64 }

// infoWindows narrows the window of Info appends using the OK reads of the
// same session. The journal only grows, so:
//
//   - if a read returned the append's value, the append took effect before
//     that read returned: ret ≤ that read's Return;
//   - if a read did not return it, the append took effect after that read
//     did, if at all: call ≥ that read's Call. An append that never took
//     effect can be placed last, after every read, so this is no loss.
//
// Both bounds keep exactly the linearizations that exist, so verdicts do not
// change. They do keep porcupine from trying, at every step of its search, to
// apply appends that no read has seen yet. If the bounds cross, the history
// is illegal anyway; the recorded window is kept and porcupine finds it.
// Values appended more than once are left alone. The result maps history
// indices to windows.
func infoWindows(ops []history.Op) map[int]interval {
	count := map[sessionValue]int{}
	index := map[sessionValue]int{}
	for k := range ops {
		op := &ops[k]
		if op.Kind != history.Append {
			continue
		}
		sv := sessionValue{op.Session, op.Value}
		count[sv]++
		if op.Outcome == history.Info {
			index[sv] = k
		}
	}
	infos := map[string][]int{} // session → Info appends with a unique value
	win := map[int]interval{}
	for sv, k := range index {
		if count[sv] == 1 {
			infos[sv.session] = append(infos[sv.session], k)
			win[k] = interval{call: ops[k].Call, ret: infinity}
		}
	}
	if len(win) == 0 {
		return nil
	}
	seenBy := map[int]int{} // Info append → last read (history index + 1) that returned it
	for r := range ops {
		read := &ops[r]
		if read.Kind != history.Read || read.Outcome != history.OK || len(infos[read.Session]) == 0 {
			continue
		}
		for _, v := range read.Values {
			if k, ok := index[sessionValue{read.Session, v}]; ok {
				seenBy[k] = r + 1
			}
		}
		for _, k := range infos[read.Session] {
			w := win[k]
			if seenBy[k] == r+1 {
				w.ret = min(w.ret, max(read.Return, read.Call))
			} else {
				w.call = max(w.call, read.Call)
			}
			win[k] = w
		}
	}
	for k, w := range win {
		if w.call > w.ret {
			win[k] = interval{call: ops[k].Call, ret: infinity}
		}
	}
	return win
}

// denseClients renumbers client ids 0, 1, 2, ... in order of first call, so
// the visualization has no empty lanes. The client ids in the history are
// still shown in each operation's metadata.
func denseClients(ops []porcupine.Operation) []porcupine.Operation {
	out := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	ids := map[int]int{}
	for k := range out {
		id, ok := ids[out[k].ClientId]
		if !ok {
			id = len(ids)
			ids[out[k].ClientId] = id
		}
		out[k].ClientId = id
	}
	return out
}

// Summary describes the result in a line or two.
func (r Result) Summary() string {
	var parts []string
	switch r.Verdict {
	case Ok:
		parts = append(parts, fmt.Sprintf("%d session(s), all linearizable", len(r.Sessions)))
	case Illegal:
		parts = append(parts, fmt.Sprintf("%d of %d session(s) not linearizable: %s", len(r.IllegalSessions), len(r.Sessions), r.sessionList(r.IllegalSessions)))
	}
	if len(r.UnknownSessions) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d session(s) undecided after %s: %s", len(r.UnknownSessions), len(r.Sessions), r.Timeout, r.sessionList(r.UnknownSessions)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "linearizable: %s: %s (%d ops: %d checked, %d info appends, %d dropped; %s)",
		strings.ToUpper(string(r.Verdict)), strings.Join(parts, "; "), r.Ops, r.Checked, r.Infos, r.Dropped, r.Elapsed.Round(time.Millisecond))
	switch {
	case r.Visualization != "":
		fmt.Fprintf(&b, "\n  visualization: %s", r.Visualization)
	case r.VisualizeErr != nil:
		fmt.Fprintf(&b, "\n  visualization failed: %v", r.VisualizeErr)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(&b, "\n  %d malformed ops, first: %s", len(r.Problems), r.Problems[0])
	}
	return b.String()
}

// String is Summary.
func (r Result) String() string { return r.Summary() }

// sessionList names up to ten sessions, each with how far porcupine got.
func (r Result) sessionList(ids []string) string {
	const most = 10
	lin := map[string]SessionResult{}
	for _, s := range r.Sessions {
		lin[s.Session] = s
	}
	var parts []string
	for k, id := range ids {
		if k == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(ids)-most))
			break
		}
		s := lin[id]
		parts = append(parts, fmt.Sprintf("%q (longest partial linearization %d of %d ops)", id, s.Linearized, s.Checked))
	}
	return strings.Join(parts, ", ")
}
