// Package provider is the runtime adapter that runs a provider's own
// coding-agent CLI as a session's agent: Claude Code (claude), OpenAI
// Codex (codex exec) or Gemini CLI (gemini), non-interactively, one
// process per turn, in the session's workspace, through package proc (its
// own process group, a clean environment, optionally bubblewrap). The
// facts about the CLIs come from the research notes
// (shared/research/agent-runtimes.md §1-3); no CLI was run to write this.
//
// # Threads
//
// Each CLI keeps its conversation — its thread — in its own files under
// HOME. A turn names the thread it runs on with Turn.Bind as soon as the
// CLI names it (claude's system/init, codex's thread.started, gemini's
// init), and the runner binds it on the session, so the next turn, on any
// node, resumes it (Epoch.Provider, Epoch.ThreadID): claude --resume=ID,
// codex exec ... resume ID, gemini --resume ID. A runtime whose session
// has no thread of its kind starts one (claude: --session-id=<a uuid fak
// makes>); when the journal holds earlier turns — on another provider,
// before a reset of the binding — the first prompt carries them, as
// "user:"/"assistant:" lines (the last 32 KiB), before the input. A
// resume that dies before the CLI names the thread (its files are not on
// this node: the session moved) is retried once on a new thread with that
// conversation, and turn.completed says so (resume_failed).
//
// # Events
//
// Assistant text is output, streamed through runner.Output; the CLIs' tool
// calls and results are tool.call and tool.result; reasoning, todo lists,
// partial messages, rate-limit notices and warnings are not journaled. The
// result line ends the turn: turn.completed's facts carry the provider,
// the thread and what the CLI reports (claude's num_turns, cost and usage;
// codex's usage; gemini's stats).
//
// # Approvals
//
// Only claude can hand its permission prompts to someone else: with
// policy "ask" it runs with --permission-prompt-tool stdio and each
// can_use_tool control request becomes approval.requested, answered by
// any attached client, the verdict written back on claude's stdin (a
// denial names who denied it). The FSM holds one pending approval, cleared
// by the next tool.result: a prompt arriving while an approved tool has
// not returned (parallel tools) is denied at once with a message asking
// the model to run it again alone. Codex exec and headless gemini decide
// by themselves (a sandbox level, an approval mode): DecidesApprovals
// says how, for the node to show.
//
// # Metering
//
// With a Gateway the CLI's model calls go through the node's metering
// gateway (its base URL and key in the CLI's variables, the session in an
// X-Trace-Id header) and the runtime charges nothing: it is
// runner.Metered. Without one it charges what the CLI's result reports:
// input tokens (cache reads and writes included), output tokens, spend
// (claude's total_cost_usd), tool calls, and queries beyond the first —
// the runner charges one query with turn.started, so claude's num_turns
// model calls charge num_turns-1 more and codex and gemini, which report
// no count, none. A failed result's usage is charged too (Turn.Charge):
// the provider billed the calls.
//
// # Failures
//
// A line that is not a JSON object with a string "type" fails the turn
// (RUNTIME_PROTOCOL, its line number) and kills the CLI; so does a CLI
// ending without a result. A non-zero exit is RUNTIME_EXIT with the tail
// of its stderr; a failure the CLI reports (claude's is_error result,
// codex's turn.failed or error, gemini's error result) is PROVIDER_ERROR
// with its message; a CLI that cannot start is RUNTIME_START; the turn
// timeout is TURN_TIMEOUT. Cancelling the turn kills the whole group and
// returns ctx's error.
//
// # Not verified
//
// These rest on the notes' sources, not on a live run, and the code takes
// the safer reading where it can:
//   - claude's control protocol (initialize, can_use_tool, the allow and
//     deny answers) is what both official SDKs speak, not a documented CLI
//     contract (notes §1.3, §6); that a resume of a thread missing here
//     fails before system/init (what the fallback to a new thread relies
//     on) is assumed for all three CLIs.
//   - Whether claude's result usage and cost, and codex's turn.completed
//     usage, cover only this process or the whole resumed thread (§6):
//     without a gateway a resumed turn may be overcharged; the gateway is
//     the reliable meter.
//   - Whether codex applies exec flags given before "resume" to the
//     resumed thread, and takes "-" (prompt on stdin) there as exec does
//     (§2.1 shows the flags before resume). Codex's top-level error line
//     is fatal by the notes, yet some versions report retries that way:
//     the turn fails with it only when no turn.completed follows.
//     command_execution's command is a string in the notes; an argv array
//     is joined.
//   - That gemini's init names the resumed session's id, and that a
//     settings.json auth type does not win over the gateway variables
//     (§3.5).
//   - That ANTHROPIC_AUTH_TOKEN wins over a claude login kept under HOME;
//     an ANTHROPIC_API_KEY handed over in Env is removed when a gateway is
//     set (it would win over the token, §1.5), as are the variables that
//     would take gemini to Code Assist or Vertex.
//
// In a bwrap sandbox everything but the workspace is read-only, the CLI's
// files under HOME included: hand over HOME=<a directory in the
// workspace> in Env (with the CLI's credentials there, or a gateway) for
// it to keep its threads.
package provider
