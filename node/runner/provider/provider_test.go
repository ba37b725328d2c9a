package provider

import (
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// uuidV4 matches the id of a new claude thread.
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// A kind's fake, as the tests common to all three see it.
type kindCase struct {
	kind string
	// newThread is the id of a thread the fake starts ("": claude's, a
	// uuid fak makes).
	newThread string
	// resumeArgs are the arguments naming a resumed thread.
	resumeArgs func(id string) []string
	// usage is what the fake reports for a plain answer, charged.
	usage *fsmpb.Budget
	// exit is what a failed exit says; malformed the protocol error;
	// providerError the provider's failure.
	exit, malformed, providerError []string
}

var kindCases = []kindCase{{
	kind:       ProviderClaude,
	resumeArgs: func(id string) []string { return []string{"--resume=" + id} },
	usage: &fsmpb.Budget{InputTokens: 9 + 1200 + 27700, OutputTokens: 77, Queries: 2,
		SpendMicros: 41200},
	exit:          []string{"exit status 3 before its result", "Credit balance is too low"},
	malformed:     []string{"line 4: not a JSON object: this is not json"},
	providerError: []string{"claude: error_during_execution", "API Error: 529 overloaded"},
}, {
	kind:          ProviderCodex,
	newThread:     "0199a213-81c0-7800-8aa1-bbab2a035a53",
	resumeArgs:    func(id string) []string { return []string{"resume", id, "-"} },
	usage:         &fsmpb.Budget{InputTokens: 24763, OutputTokens: 122},
	exit:          []string{"exit status 2 before its result", "401 Unauthorized"},
	malformed:     []string{`line 3: "type" is not a string`},
	providerError: []string{"codex: stream disconnected before completion"},
}, {
	kind:          ProviderGemini,
	newThread:     "5a4b3c2d-1e0f-4a1b-9c8d-7e6f5a4b3c2d",
	resumeArgs:    func(id string) []string { return []string{"--resume", id} },
	usage:         &fsmpb.Budget{InputTokens: 120, OutputTokens: 40},
	exit:          []string{"exit status 1 before its result", "API key not valid"},
	malformed:     []string{"line 3: not a JSON object: not json at all"},
	providerError: []string{"gemini: MaxSessionTurnsError: Maximum session turns exceeded"},
}}

// eachKind runs test for every kind, in sequence (the fixture sets the
// process environment).
func eachKind(t *testing.T, test func(t *testing.T, k kindCase)) {
	for _, k := range kindCases {
		t.Run(k.kind, func(t *testing.T) { test(t, k) })
	}
}

// containsRun reports whether argv holds sub, in order and adjacent.
func containsRun(argv, sub []string) bool {
	return strings.Contains("\x00"+strings.Join(argv, "\x00")+"\x00", "\x00"+strings.Join(sub, "\x00")+"\x00")
}

// The first turn starts a thread and binds it; the next turn resumes it.
func TestAThreadIsStartedThenResumed(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, ws := f.start(Options{Kind: k.kind}, history(1, "say hi"), nil)
		tr := &runnertest.Turn{Input: 1}
		res := mustTurn(t, rt, inputEvent(1, "say hi"), tr)
		b := tr.Binding()
		if b.Provider != k.kind || b.ThreadID == "" {
			t.Fatalf("bound %+v, want a %s thread", b, k.kind)
		}
		thread := b.ThreadID
		if k.newThread != "" && thread != k.newThread {
			t.Fatalf("bound thread %q, want the fake's %q", thread, k.newThread)
		}
		if k.kind == ProviderClaude {
			if !uuidV4.MatchString(thread) {
				t.Fatalf("claude thread %q is not a v4 uuid", thread)
			}
			if r := f.last(); r.argv[len(r.argv)-1] != "--session-id="+thread {
				t.Fatalf("argv %q does not start the thread it bound", r.argv)
			}
		}
		if want := "new " + thread + ": say hi"; !strings.Contains(tr.Output(), want) {
			t.Fatalf("output %q does not say %q", tr.Output(), want)
		}
		if res.Facts["provider"] != k.kind || res.Facts["thread_id"] != thread || res.Facts["resumed"] != false {
			t.Fatalf("facts %v", res.Facts)
		}
		r := f.last()
		for key, want := range map[string]string{
			"FAK_SESSION_ID": testSession, "FAK_EPOCH": "3", "FAK_INPUT_SEQ": "1",
		} {
			if r.env[key] != want {
				t.Errorf("%s=%q, want %q", key, r.env[key], want)
			}
		}
		if r.line("cwd ") != ws {
			t.Errorf("ran in %q, want the workspace %q", r.line("cwd "), ws)
		}

		tr2 := &runnertest.Turn{Input: 3}
		res2 := mustTurn(t, rt, inputEvent(3, "again"), tr2)
		if want := "resumed " + thread + ": again"; !strings.Contains(tr2.Output(), want) {
			t.Fatalf("second output %q does not say %q", tr2.Output(), want)
		}
		if r := f.last(); !containsRun(r.argv, k.resumeArgs(thread)) {
			t.Fatalf("second argv %q does not resume %s", r.argv, thread)
		}
		if b := tr2.Binding(); b.ThreadID != thread {
			t.Fatalf("second turn bound %+v, want %s", b, thread)
		}
		if res2.Facts["resumed"] != true {
			t.Fatalf("second facts %v", res2.Facts)
		}
	})
}

// A runtime started on the session's thread of its kind resumes it; a
// thread of another kind is not its own.
func TestStartResumesTheSessionsThread(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, _ := f.start(Options{Kind: k.kind}, history(1, "hello"), func(ep *runner.Epoch) {
			ep.Provider, ep.ThreadID = k.kind, "thread-from-before"
		})
		tr := &runnertest.Turn{Input: 1}
		mustTurn(t, rt, inputEvent(1, "hello"), tr)
		if !strings.Contains(tr.Output(), "resumed thread-from-before: hello") {
			t.Fatalf("output %q", tr.Output())
		}
		if r := f.last(); !containsRun(r.argv, k.resumeArgs("thread-from-before")) {
			t.Fatalf("argv %q", r.argv)
		}

		other := ProviderCodex
		if k.kind == ProviderCodex {
			other = ProviderGemini
		}
		rt, _ = f.start(Options{Kind: k.kind}, history(1, "hello"), func(ep *runner.Epoch) {
			ep.Provider, ep.ThreadID = other, "not-mine"
		})
		tr = &runnertest.Turn{Input: 1}
		mustTurn(t, rt, inputEvent(1, "hello"), tr)
		if !strings.Contains(tr.Output(), "new ") || strings.Contains(strings.Join(f.last().argv, " "), "not-mine") {
			t.Fatalf("another provider's thread was resumed: %q, argv %q", tr.Output(), f.last().argv)
		}
	})
}

// A new thread's first prompt carries the conversation the journal holds.
func TestANewThreadGetsTheJournalsConversation(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		j := history(9, "and now?", "first question", "first answer", "second \"question\"", "second answer")
		rt, _ := f.start(Options{Kind: k.kind}, j, nil)
		tr := &runnertest.Turn{Input: 9}
		res := mustTurn(t, rt, inputEvent(9, "and now?"), tr)
		want := conversationHeader + "user: first question\nassistant: first answer\n" +
			"user: second \"question\"\nassistant: second answer\n\nNow: and now?"
		if !strings.Contains(tr.Output(), want) {
			t.Fatalf("output %q does not hold the prompt %q", tr.Output(), want)
		}
		if res.Facts["context_turns"] != 2 {
			t.Fatalf("facts %v", res.Facts)
		}
		// The thread resumed carries only the input.
		tr = &runnertest.Turn{Input: 11}
		mustTurn(t, rt, inputEvent(11, "more"), tr)
		if strings.Contains(tr.Output(), "Conversation so far") {
			t.Fatalf("a resumed thread got the conversation again: %q", tr.Output())
		}
	})
}

// A thread that cannot be resumed here (the session moved from another
// node) is replaced by a new one with the journal's conversation.
func TestALostThreadIsReplaced(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		j := history(5, "go on", "earlier", "earlier answer")
		rt, _ := f.start(Options{Kind: k.kind}, j, func(ep *runner.Epoch) {
			ep.Provider, ep.ThreadID = k.kind, "missing-thread"
		})
		tr := &runnertest.Turn{Input: 5}
		res := mustTurn(t, rt, inputEvent(5, "go on"), tr)
		runs := f.runs()
		if len(runs) != 2 || !containsRun(runs[0].argv, k.resumeArgs("missing-thread")) {
			t.Fatalf("runs %+v, want a resume of missing-thread then a new thread", runs)
		}
		b := tr.Binding()
		if b.ThreadID == "" || b.ThreadID == "missing-thread" {
			t.Fatalf("bound %+v, want the new thread", b)
		}
		if !strings.Contains(tr.Output(), "new "+b.ThreadID+": "+conversationHeader+"user: earlier\n") {
			t.Fatalf("output %q", tr.Output())
		}
		if lost, _ := res.Facts["resume_failed"].(string); !strings.HasPrefix(lost, "missing-thread: RUNTIME_EXIT") {
			t.Fatalf("facts %v", res.Facts)
		}
	})
}

// Without a gateway the runtime charges what the CLI reports; with one
// it charges nothing (the gateway did) and says so.
func TestUsageIsChargedUnlessAGatewayMeters(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, _ := f.start(Options{Kind: k.kind}, history(1, "hi"), nil)
		if rt.MeteredByGateway() {
			t.Fatal("metered without a gateway")
		}
		res := mustTurn(t, rt, inputEvent(1, "hi"), &runnertest.Turn{Input: 1})
		if !proto.Equal(res.Usage, k.usage) {
			t.Fatalf("usage %v, want %v", res.Usage, k.usage)
		}

		rt, _ = f.start(Options{Kind: k.kind, Gateway: &Gateway{URL: "http://127.0.0.1:7010", Key: "gw-key"}}, history(1, "hi"), nil)
		var m runner.Runtime = rt
		if mm, ok := m.(runner.Metered); !ok || !mm.MeteredByGateway() {
			t.Fatal("a runtime with a gateway is not runner.Metered")
		}
		tr := &runnertest.Turn{Input: 1}
		res = mustTurn(t, rt, inputEvent(1, "hi"), tr)
		if res.Usage != nil || len(tr.Charges()) != 0 {
			t.Fatalf("usage %v, charges %v with a gateway", res.Usage, tr.Charges())
		}
	})
}

// The gateway's address, key and the session's trace header reach the
// CLI the way it reads them; what would bypass it does not.
func TestTheGatewayIsWiredIn(t *testing.T) {
	gw := &Gateway{URL: "http://127.0.0.1:7010/", Key: "gw-key"}
	for _, tc := range []struct {
		kind string
		env  map[string]string
		args []string
	}{
		{ProviderClaude, map[string]string{
			"ANTHROPIC_BASE_URL":       "http://127.0.0.1:7010/gateway/anthropic",
			"ANTHROPIC_AUTH_TOKEN":     "gw-key",
			"ANTHROPIC_CUSTOM_HEADERS": "X-Trace-Id: " + testSession,
			"ANTHROPIC_API_KEY":        "",
		}, nil},
		{ProviderCodex, map[string]string{"FAK_GATEWAY_KEY": "gw-key"}, []string{
			"-c", "model_provider=fak",
			"-c", `model_providers.fak={name="fak",base_url="http://127.0.0.1:7010/gateway/openai/v1",env_key="FAK_GATEWAY_KEY",wire_api="responses",supports_websockets=false,http_headers={"X-Trace-Id"="` + testSession + `"}}`,
		}},
		{ProviderGemini, map[string]string{
			"GOOGLE_GEMINI_BASE_URL":     "http://127.0.0.1:7010/gateway/gemini",
			"GEMINI_API_KEY":             "gw-key",
			"GEMINI_CLI_CUSTOM_HEADERS":  "X-Trace-Id: " + testSession,
			"GEMINI_CLI_TRUST_WORKSPACE": "true",
			"GOOGLE_GENAI_USE_GCA":       "",
		}, nil},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			f := newFixture(t)
			rt, _ := f.start(Options{Kind: tc.kind, Gateway: gw,
				Env: []string{"ANTHROPIC_API_KEY=sk-account", "GEMINI_API_KEY=account", "GOOGLE_GENAI_USE_GCA=true"}},
				history(1, "hi"), nil)
			mustTurn(t, rt, inputEvent(1, "hi"), &runnertest.Turn{Input: 1})
			r := f.last()
			for k, want := range tc.env {
				if r.env[k] != want {
					t.Errorf("%s=%q, want %q", k, r.env[k], want)
				}
			}
			if tc.args != nil && !containsRun(r.argv, tc.args) {
				t.Errorf("argv %q lacks %q", r.argv, tc.args)
			}
		})
	}
}

// A CLI exiting non-zero fails the turn with its stderr.
func TestAFailedExitIsRuntimeExit(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, _ := f.start(Options{Kind: k.kind}, history(1, "fail-exit"), nil)
		_, err := proctest.RunTurn(t, rt, inputEvent(1, "fail-exit"), &runnertest.Turn{Input: 1})
		proctest.WantReason(t, err, ReasonRuntimeExit, k.exit...)
	})
}

// A line that is not a typed JSON object fails the turn at once, the CLI
// killed.
func TestAMalformedLineIsAProtocolError(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, _ := f.start(Options{Kind: k.kind}, history(1, "malformed"), nil)
		r := proctest.Go(t, rt, inputEvent(1, "malformed"), &runnertest.Turn{Input: 1}).Await(t, proctest.Promptly)
		proctest.WantReason(t, r.Err, ReasonRuntimeProtocol, k.malformed...)
	})
}

// A failure the CLI reports is the provider's error.
func TestAReportedFailureIsAProviderError(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, _ := f.start(Options{Kind: k.kind}, history(1, "provider-error"), nil)
		_, err := proctest.RunTurn(t, rt, inputEvent(1, "provider-error"), &runnertest.Turn{Input: 1})
		proctest.WantReason(t, err, ReasonProviderError, k.providerError...)
	})
}

// A CLI that is not installed fails the turn saying so.
func TestAMissingCLIFailsToStart(t *testing.T) {
	eachKind(t, func(t *testing.T, k kindCase) {
		f := newFixture(t)
		rt, _ := f.start(Options{Kind: k.kind, Command: []string{"/nonexistent/" + k.kind}}, history(1, "hi"), nil)
		_, err := proctest.RunTurn(t, rt, inputEvent(1, "hi"), &runnertest.Turn{Input: 1})
		proctest.WantReason(t, err, ReasonRuntimeStart, "/nonexistent/"+k.kind)
	})
}
