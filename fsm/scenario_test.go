package fsm

import (
	"cmp"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// TestScenarios runs the rule scripts in testdata/{journal,lease,ledger,
// budget,move,turn,external,capabilities}: each file is one fresh FSM
// driven by a small command language, every command printing its result
// and the events it journaled.
// `go test ./fsm -run Scenario -rewrite` regenerates the expected output;
// read the diff before committing it. The language:
//
//	at 30s                          the leader's time for the next commands (from 0s)
//	create S [node= model= provider= adapter= account= launch= host=] [turns= output_tokens=
//	       queries= spend= tool_calls= input_tokens= context=] [recover=manual]
//	stop S [reason=R]
//	append S [expect=N]             input: one event a line, "kind text"
//	attach S A [kind=terminal] [name=tty-A] [ttl=30s]   detach S A [reason=R]
//	take-lease S A [steal] [ttl=30s]
//	renew-lease S A [ttl=]          release-lease S [A] [reason=R]
//	input S A [epoch=N]             input: the text (epoch: the current one)
//	interrupt S A [epoch=N]         the lease holder interrupts the running turn
//	answer S A seq=N [approve] [note=W]
//	runner S [epoch=N] [charge-turn] [starts=SEQ] [usage turns= ...] [bind=PROVIDER/THREAD]
//	                                input: one event a line, "kind text"
//	charge S|launch=L [spend= turns= output_tokens= queries= tool_calls= input_tokens= context=] [incurred] [unmetered=REASON]
//	exhausted S                     the axis a gateway's admission finds used up
//	fresh|reset S id=P              clear S id=P [source=new] [reason=R] [provider=X]
//	fork S as=F [at=N] [id=P]       bind-launch L S [provider=X] [host=H]    hook L SOURCE id=P
//	register-node N [adapters=(echo,exec)] [approvals=(codex=POLICY)]
//	                                a node record offering those runtimes
//	move-request S M [to=N] [model=] [provider=] [adapter=] [cause=operator] [accept-degradation] [interrupt]
//	move-checkpoint S M [epoch=N] [seq=N] [digest=bad]
//	move-admit S M [node=N] [degradation=(...)]
//	move-restore S M [epoch=N] [digest=bad]    move-cutover S M
//	move-fail S M [unsafe]          input: the reason
//	workspace-copy S node=N digest=D as-of=SEQ [bytes=B] [epoch=E]   a host's post-turn copy
//	journal S [from=N] [data]       session S       envelope S
//	caps S [A] [role=operator]      the capability set as attachment A (none: an
//	                                observer) with a token of role sees it
//
// Any command takes req=ID (its request id). A clear/new child's derived
// id prints as PARENT/PROVIDER-ID and may be used as such in later commands.
func TestScenarios(t *testing.T) {
	for _, rule := range []string{"journal", "lease", "ledger", "budget", "move", "turn", "external", "capabilities", "retention"} {
		datadriven.Walk(t, filepath.Join("testdata", rule), func(t *testing.T, path string) {
			sc := &scenario{h: newHarness(t), alias: map[string]string{}}
			datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
				sc.h.t = t
				return sc.run(t, td)
			})
		})
	}
}

type scenario struct {
	h     *harness
	now   int64             // nanoseconds after t0
	alias map[string]string // derived session id -> printed name
}

func (sc *scenario) run(t *testing.T, td *datadriven.TestData) string {
	h := sc.h
	var p []string // positional arguments: those with no value
	for _, a := range td.CmdArgs {
		if len(a.Vals) == 0 {
			p = append(p, a.Key)
		}
	}
	pos := func(i int) string {
		if i >= len(p) {
			td.Fatalf(t, "%s: missing argument %d", td.Cmd, i+1)
		}
		return sc.unalias(p[i])
	}
	val := func(key, def string) string {
		if a, ok := td.Arg(key); ok {
			return strings.Join(a.Vals, ",")
		}
		return def
	}
	num := func(key string, def uint64) uint64 {
		n, err := strconv.ParseUint(val(key, strconv.FormatUint(def, 10)), 10, 64)
		if err != nil {
			td.Fatalf(t, "%s: %v", key, err)
		}
		return n
	}
	dur := func(key string, def time.Duration) int64 {
		d, err := time.ParseDuration(val(key, def.String()))
		if err != nil {
			td.Fatalf(t, "%s: %v", key, err)
		}
		return int64(d)
	}
	events := func() []*fsmpb.EventInput {
		var out []*fsmpb.EventInput
		for _, l := range strings.Split(td.Input, "\n") {
			if kind, text, _ := strings.Cut(strings.TrimSpace(l), " "); kind != "" {
				out = append(out, ev(kind, text))
			}
		}
		return out
	}
	budget := func() *fsmpb.Budget {
		return &fsmpb.Budget{Turns: num("turns", 0), OutputTokens: num("output_tokens", 0),
			Queries: num("queries", 0), SpendMicros: num("spend", 0), ToolCalls: num("tool_calls", 0),
			InputTokens: num("input_tokens", 0)}
	}
	cur := func() *fsmpb.Session { // the session named first, as it is now
		s, err := h.f.Session(pos(0))
		if err != nil {
			return &fsmpb.Session{}
		}
		return s
	}

	var c *fsmpb.Command
	switch td.Cmd {
	case "at":
		d, err := time.ParseDuration(p[0])
		if err != nil || int64(d) < sc.now {
			td.Fatalf(t, "at %s: time runs forward only (now %s)", p[0], time.Duration(sc.now))
		}
		sc.now = int64(d)
		return "time " + p[0]
	case "journal":
		return sc.events(pos(0), num("from", 1), td.HasArg("data"))
	case "session":
		return sc.session(cur())
	case "caps":
		var at *fsmpb.Attachment
		if len(p) > 1 {
			at = &fsmpb.Attachment{AttachmentId: pos(1)}
		}
		return strings.TrimSuffix(renderCaps(Capabilities(cur(), at, Role(val("role", RoleOperator)), t0+sc.now)), "\n")
	case "envelope":
		e, err := h.f.Envelope(cur().EnvelopeId)
		if err != nil {
			return "error " + err.Error()
		}
		return fmt.Sprintf("envelope %s: %d sessions, %d refusals\nlimits %s\nused   %s",
			sc.name(e.EnvelopeId), e.Sessions, e.Refusals, budgetText(e.Limits), budgetText(e.Used))
	case "exhausted":
		e, err := h.f.Envelope(cur().EnvelopeId)
		if err != nil {
			return "error " + err.Error()
		}
		return "exhausted: " + cmp.Or(MayStart(e, cur()), "none")
	case "create":
		c = create(pos(0))
		c.GetCreateSession().Placement = &fsmpb.Placement{RuntimeAdapter: val("adapter", ""), Provider: val("provider", ""),
			AccountRef: val("account", ""), Model: val("model", ""), Node: val("node", ""), LaunchId: val("launch", ""), Host: val("host", "")}
		c.GetCreateSession().Policy = &fsmpb.Policy{Limits: budget(), ContextCap: num("context", 0), Recover: val("recover", "")}
	case "stop":
		c = stop(pos(0), val("reason", ""))
	case "append":
		if td.HasArg("expect") {
			c = appendIf(pos(0), num("expect", 0), events()...)
		} else {
			c = appendEv(pos(0), events()...)
		}
	case "attach":
		c = attachCmd(pos(0), pos(1), val("kind", "terminal"), val("name", "tty-"+pos(1)), dur("ttl", 30*time.Second))
	case "detach":
		c = detach(pos(0), pos(1), val("reason", ""))
	case "take-lease":
		c = takeLease(pos(0), pos(1), td.HasArg("steal"), dur("ttl", 30*time.Second))
	case "renew-lease":
		c = renewLease(pos(0), pos(1), dur("ttl", 30*time.Second))
	case "release-lease":
		a := ""
		if len(p) > 1 {
			a = pos(1)
		}
		c = releaseLease(pos(0), a, val("reason", ""))
	case "input":
		c = submitInput(pos(0), pos(1), num("epoch", cur().Epoch), td.Input)
	case "interrupt":
		c = interruptTurn(pos(0), pos(1), num("epoch", cur().Epoch))
	case "answer":
		c = answerApproval(pos(0), pos(1), num("seq", 0), td.HasArg("approve"), val("note", ""))
	case "runner":
		c = runnerAppend(pos(0), num("epoch", cur().Epoch), events()...)
		ra := c.GetRunnerAppend()
		ra.ChargeTurn = td.HasArg("charge-turn")
		ra.StartsInput = num("starts", 0)
		if td.HasArg("usage") {
			ra.Usage = budget()
		}
		if b := val("bind", ""); b != "" {
			provider, thread, _ := strings.Cut(b, "/")
			ra.Binding = &fsmpb.ProviderBinding{Provider: provider, ThreadId: thread}
		}
	case "charge":
		if l := val("launch", ""); l != "" {
			c = launchUsage(l, budget(), num("context", 0))
		} else {
			c = recordUsage(pos(0), budget(), num("context", 0))
		}
		c.GetRecordUsage().Incurred, c.GetRecordUsage().Unmetered = td.HasArg("incurred"), val("unmetered", "")
	case "fresh":
		c = fresh(pos(0), val("id", ""))
	case "reset":
		c = reset(pos(0), val("id", ""))
	case "clear":
		c = clearCmd(pos(0), val("source", "clear"), val("reason", ""), val("provider", ""), val("id", ""))
	case "fork":
		c = forkCmd(pos(0), num("at", 0), val("as", ""), val("id", ""))
	case "bind-launch":
		c = bindLaunch(p[0], val("provider", ""), pos(1))
		c.GetBindLaunch().Host = val("host", "laptop")
	case "register-node":
		adapters, _ := td.Arg("adapters")
		approvals, _ := td.Arg("approvals")
		c = registerNode(&fsmpb.NodeRecord{Name: p[0], RuntimeAdapters: adapters.Vals, RuntimeApprovals: approvals.Vals})
	case "drain":
		c = setDraining(p[0], !td.HasArg("off"))
	case "hook":
		c = hookStart(p[0], p[1], val("id", ""))
	case "move-request":
		target := &fsmpb.Placement{Node: val("to", ""), Model: val("model", ""), Provider: val("provider", ""), RuntimeAdapter: val("adapter", "")}
		c = requestMove(pos(0), pos(1), target, val("cause", MoveCauseOperator))
		c.GetRequestMove().AcceptDegradation = td.HasArg("accept-degradation")
		c.GetRequestMove().Interrupt = td.HasArg("interrupt")
	case "move-checkpoint":
		s := cur()
		seq := num("seq", s.HeadSeq)
		c = moveCheckpoint(pos(0), pos(1), num("epoch", s.Epoch), seq, sc.digest(s, seq, val("digest", "")))
	case "move-admit":
		pl := &fsmpb.Placement{}
		if s := cur(); s.Move != nil {
			pl = admitted(s)
		}
		pl.Node = val("node", pl.Node)
		degr, _ := td.Arg("degradation")
		c = moveAdmit(pos(0), pos(1), pl, admitChecks, degr.Vals)
	case "move-restore":
		s := cur()
		c = moveRestore(pos(0), pos(1), num("epoch", NextEpoch(s)), sc.digest(s, s.Move.GetCheckpointSeq(), val("digest", "")))
	case "move-cutover":
		c = moveCutover(pos(0), pos(1))
	case "workspace-copy":
		c = &fsmpb.Command{Body: &fsmpb.Command_RecordWorkspaceCopy{RecordWorkspaceCopy: &fsmpb.RecordWorkspaceCopy{
			SessionId: pos(0), Epoch: num("epoch", cur().Epoch), Copy: &fsmpb.WorkspaceCopy{
				Workspace: &fsmpb.Workspace{Digest: val("digest", ""), Bytes: num("bytes", 0)},
				Node:      val("node", ""), AfterInput: num("as-of", 0), TurnsCompleted: cur().TurnsCompleted}}}}
	case "move-fail":
		c = moveFail(pos(0), pos(1), td.Input, td.HasArg("unsafe"))
	case "purge":
		ids := make([]string, len(p))
		for i := range p {
			ids[i] = pos(i)
		}
		c = &fsmpb.Command{Body: &fsmpb.Command_PurgeSessions{PurgeSessions: &fsmpb.PurgeSessions{
			SessionIds: ids, Cause: val("cause", PurgeCauseOperator), By: val("by", "operator"),
			StoppedBeforeUnixNano: t0 + dur("before", 0)}}}
	case "audit":
		return sc.audit()
	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	c.RequestId = val("req", "")
	c.TimeUnixNano = t0 + sc.now
	first := "" // the session the command names, if any
	if len(p) > 0 {
		first = pos(0)
	}
	return sc.applyAndShow(c, first)
}

// digest is the journal digest of events 1..seq of s, or one that matches
// no journal when the script says digest=bad.
func (sc *scenario) digest(s *fsmpb.Session, seq uint64, want string) string {
	if want == "bad" || seq == 0 || seq > s.HeadSeq {
		return hexDigest
	}
	return sc.h.digest(s.SessionId, seq)
}

// applyAndShow applies c as one log entry and prints its result, then
// every event it journaled in any session (first's first, then by id). A
// refusal that journaled nothing must have changed nothing at all.
func (sc *scenario) applyAndShow(c *fsmpb.Command, first string) string {
	before := map[string]uint64{}
	for _, s := range sc.sessions() {
		before[s.SessionId] = s.HeadSeq
	}
	state := sc.ruleState()
	r := sc.h.apply1(c)
	var b strings.Builder
	switch {
	case r.Error != nil:
		fmt.Fprintf(&b, "error %s: %s", r.Error.Reason, r.Error.Message)
	case r.NoOp:
		b.WriteString("ok (no-op)")
	default:
		b.WriteString("ok")
	}
	if a := r.GetAppend(); a != nil {
		fmt.Fprintf(&b, ": #%d", a.FirstSeq)
		if a.LastSeq != a.FirstSeq {
			fmt.Fprintf(&b, "..#%d", a.LastSeq)
		}
		if a.TurnRefused {
			b.WriteString(" (turn refused)")
		}
		if a.UsageRefused {
			b.WriteString(" (usage refused)")
		}
	}
	if pg := r.GetPurge(); pg != nil {
		for _, e := range pg.Entries {
			fmt.Fprintf(&b, "\npurged %s: %d events, %d bytes (%s, by %s)", sc.name(e.SessionId), e.Events, e.Bytes, e.Cause, e.By)
		}
		for _, id := range pg.Skipped {
			fmt.Fprintf(&b, "\nskipped %s", sc.name(id))
		}
	}
	if bd := r.GetBoundary(); bd != nil {
		sc.learn()
		fmt.Fprintf(&b, ": %s → %s", bd.Action, bd.Session.GetSessionId())
		if bd.Pruned > 0 {
			fmt.Fprintf(&b, " (%d cached entries pruned)", bd.Pruned)
		}
	}
	all, journaled := sc.sessions(), false
	for _, firstPass := range []bool{true, false} {
		for _, s := range all {
			if (s.SessionId == first) == firstPass && s.HeadSeq > before[s.SessionId] {
				b.WriteString("\n" + sc.events(s.SessionId, before[s.SessionId]+1, false))
				journaled = true
			}
		}
	}
	if r.Error != nil && !journaled && sc.ruleState() != state {
		sc.h.t.Fatalf("refused command (%s) changed the state", r.Error.Reason)
	}
	return sc.names(b.String())
}

// ruleState is the database content but for the request-id records, which
// any command with a request id writes and any entry may prune.
func (sc *scenario) ruleState() string {
	var keep []string
	skip := false
	for _, l := range strings.Split(sc.h.state(), "\n") {
		if strings.HasPrefix(l, "[") {
			skip = l == "[requests]" || l == "[expiry]"
		}
		if !skip {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func (sc *scenario) sessions() []*fsmpb.Session {
	all, _, _ := sc.h.f.Sessions("", 1<<20)
	return all
}

// learn names every derived child id PARENT/PROVIDER-ID.
func (sc *scenario) learn() {
	for _, s := range sc.sessions() {
		if _, ok := sc.alias[s.SessionId]; !ok && strings.HasPrefix(s.SessionId, "ses_") && s.ParentSession != "" {
			sc.alias[s.SessionId] = sc.name(s.ParentSession) + "/" + s.ProviderSessionId
		}
	}
}

func (sc *scenario) name(id string) string {
	if n, ok := sc.alias[id]; ok {
		return n
	}
	return id
}

func (sc *scenario) unalias(name string) string {
	for id, n := range sc.alias {
		if n == name {
			return id
		}
	}
	return name
}

// names prints derived ids by their alias and digests by their first 12
// hex digits.
func (sc *scenario) names(s string) string {
	for id, n := range sc.alias {
		s = strings.ReplaceAll(s, id, n)
	}
	return digestRe.ReplaceAllString(s, "$1…")
}

var (
	unixNanoRe = regexp.MustCompile(`"([a-z_]*unix_nano)":(\d+)`)
	digestRe   = regexp.MustCompile(`\b([0-9a-f]{12})[0-9a-f]{52}\b`)
)

// events prints id's events from seq on, one a line: "S #SEQ KIND: TEXT",
// with the event's data under it when asked or when it has no text. Times
// in the data print relative to the scenario's start, digests shortened.
// audit prints the fleet's audit log.
func (sc *scenario) audit() string {
	es, err := sc.h.f.Audit(1, 1<<20)
	if err != nil {
		return "error " + err.Error()
	}
	lines := []string{}
	for _, e := range es {
		lines = append(lines, fmt.Sprintf("audit #%d %s %s at %s: %q stopped at %s, %d events (%s, by %s)",
			e.Seq, e.Kind, sc.name(e.SessionId), rel(e.TimeUnixNano), e.Title, rel(e.StoppedUnixNano), e.Events, e.Cause, e.By))
	}
	if len(lines) == 0 {
		return "audit log empty"
	}
	return strings.Join(lines, "\n")
}

func (sc *scenario) events(id string, from uint64, data bool) string {
	evs, _, err := sc.h.f.Events(id, from, 1<<30)
	if err != nil {
		return "error " + err.Error()
	}
	var lines []string
	for _, e := range evs {
		line := fmt.Sprintf("%s #%d %s", sc.name(id), e.Seq, e.Kind)
		if e.Text != "" {
			line += ": " + e.Text
		}
		lines = append(lines, line)
		if len(e.Data) > 0 && (data || e.Text == "") {
			d := unixNanoRe.ReplaceAllStringFunc(string(e.Data), func(m string) string {
				sub := unixNanoRe.FindStringSubmatch(m)
				n, _ := strconv.ParseInt(sub[2], 10, 64)
				return fmt.Sprintf("%q:%q", sub[1], rel(n))
			})
			lines = append(lines, "  "+d)
		}
	}
	return sc.names(strings.Join(lines, "\n"))
}

func rel(ns int64) string { return time.Duration(ns - t0).String() }

func placementText(p *fsmpb.Placement) string {
	var out []string
	for _, f := range [][2]string{{"adapter", p.GetRuntimeAdapter()}, {"provider", p.GetProvider()},
		{"model", p.GetModel()}, {"account", p.GetAccountRef()}, {"node", p.GetNode()},
		{"launch", p.GetLaunchId()}, {"host", p.GetHost()}, {"approvals", p.GetApprovals()}} {
		if f[1] != "" {
			out = append(out, f[0]+"="+f[1])
		}
	}
	return strings.Join(out, " ")
}

func budgetText(b *fsmpb.Budget) string {
	out := fmt.Sprintf("turns=%d output_tokens=%d queries=%d spend=%d tool_calls=%d",
		b.GetTurns(), b.GetOutputTokens(), b.GetQueries(), b.GetSpendMicros(), b.GetToolCalls())
	if b.GetInputTokens() > 0 {
		out += fmt.Sprintf(" input_tokens=%d", b.GetInputTokens())
	}
	return out
}

// session prints the state of s a rule depends on, one fact a line, zero
// values left out.
func (sc *scenario) session(s *fsmpb.Session) string {
	if s.SessionId == "" {
		return "no such session"
	}
	state := strings.TrimPrefix(s.State.String(), "SESSION_STATE_")
	if s.StopReason != "" {
		state += " (" + s.StopReason + ")"
	}
	out := []string{fmt.Sprintf("%s %s, head #%d, epoch %d", sc.name(s.SessionId), state, s.HeadSeq, s.Epoch)}
	add := func(ok bool, format string, args ...any) {
		if ok {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	add(s.MaxEpoch > s.Epoch, "highest epoch issued: %d", s.MaxEpoch)
	add(true, "placement: %s", placementText(s.Placement))
	l, m := s.Lease, s.Move
	add(l != nil, "lease: %s (%s %s) taken %s, expires %s", l.GetAttachmentId(), l.GetClientKind(), l.GetClientName(),
		rel(l.GetTakenUnixNano()), rel(l.GetExpiresUnixNano()))
	add(s.Attachments > 0, "attachments: %d", s.Attachments)
	add(len(s.QueuedInputs) > 0, "queued inputs: %v", s.QueuedInputs)
	add(s.TurnInputSeq > 0, "turn running on input #%d", s.TurnInputSeq)
	add(s.PendingApprovalSeq > 0, "approval pending at #%d", s.PendingApprovalSeq)
	add(s.TurnsCompleted > 0, "turns completed: %d", s.TurnsCompleted)
	add(s.ContextUsed > 0 || s.ContextCap > 0, "context: %d used of %d", s.ContextUsed, s.ContextCap)
	add(s.EnvelopeId != s.SessionId, "envelope: %s", sc.name(s.EnvelopeId))
	add(s.Provider != "", "provider: %s", s.Provider)
	add(s.ProviderSessionId != "" && !s.ProviderThread, "provider session: %s", s.ProviderSessionId)
	add(s.ProviderThread, "provider thread: %s (the next turn resumes it)", s.ProviderSessionId)
	add(s.ParentSession != "" && s.ForkAddress == 0, "parent: %s (%s)", sc.name(s.ParentSession), s.BoundarySource)
	add(s.ForkAddress > 0, "parent: %s (%s at #%d)", sc.name(s.ParentSession), s.BoundarySource, s.ForkAddress)
	add(s.Resets > 0, "resets: %d (last boundary #%d)", s.Resets, s.ResetSeq)
	add(m != nil, "move %s: %s (%s) %s → %s, source epoch %d", m.GetMoveId(), m.GetState(), m.GetCause(),
		m.GetSourceNode(), orAny(m.GetTarget().GetNode()), m.GetSourceEpoch())
	add(m.GetCheckpointSeq() > 0, "move checkpoint: #%d", m.GetCheckpointSeq())
	add(m.GetNewEpoch() > 0, "move restored as epoch %d on %s", m.GetNewEpoch(), m.GetAdmitted().GetNode())
	if l := m.GetCacheLineage(); l != nil {
		add(true, "move cache: %s (%s) thread %q", l.Cache, l.Why, l.ProviderThread)
	}
	add(m.GetWarmupStartedUnixNano() != 0, "move warm-up: input #%d, started %s, took %s", m.GetWarmupInput(),
		rel(m.GetWarmupStartedUnixNano()), time.Duration(m.GetWarmupNanos()))
	add(m.GetReason() != "", "move failed in %s: %s", m.GetPhase(), m.GetReason())
	add(len(m.GetDegradation()) > 0, "move degradation: %v", m.GetDegradation())
	add(s.MovesCompleted > 0, "moves completed: %d", s.MovesCompleted)
	add(s.Stranded, "stranded on %s", s.StrandedNode)
	if cp := s.WorkspaceCopy; cp != nil {
		add(true, "workspace copy: %s on %s as of #%d (epoch %d)", cp.Workspace.GetDigest(), cp.Node, cp.AfterInput, cp.Epoch)
	}
	return sc.names(strings.Join(out, "\n"))
}
