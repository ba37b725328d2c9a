// Package model is fak's own agent loop over any OpenAI-compatible Chat
// Completions endpoint (OpenAI, vLLM, llama.cpp, Ollama, ...), through the
// official Go SDK. A turn rebuilds the context from the journal, streams
// the model's reply into output events (coalesced by runner.Output), runs
// the tools the model calls — each journaled as tool.call, gated by
// approval.requested unless its tool is auto-approved, confined to the
// session's workspace, its result journaled as tool.result — and calls the
// model again with their results, until it answers without tool calls.
//
// # The context is the journal
//
// The runtime keeps nothing the journal lacks: the messages of every
// request are rebuilt from the events after the last reset boundary, so a
// restarted runner or the destination of a move sends the model the very
// bytes the source would have (RequestBody). The rules (Messages):
//
//   - The system prompt comes first (DefaultSystem unless configured). It
//     names no path of the node: every node must build the same bytes.
//   - An input becomes a user message where the turn serving it starts
//     (turn.started names it by input_seq), so a reply follows the input
//     it answers even when inputs queued behind one another. An input no
//     turn has started on is not sent, unless it is the last event: then
//     it is the input being served by a caller that cut the context at it.
//   - A turn's output events up to its next tool.call, tool.result or end
//     make one assistant message, their texts concatenated (coalescing
//     does not change it). A step — one model call — journals its text
//     first and then all its tool.call events together, so the tool.call
//     events that follow a step's output join the same assistant message
//     as its tool_calls (id, name, and arguments exactly as the model
//     produced them); the journal's order alone tells the steps apart.
//   - A tool.result becomes a tool message answering its call (by id); a
//     result that answers no call in the context is not sent.
//   - A tool call left without a result when its turn ended (interrupted,
//     failed, its node lost) is answered with NoResult, since the API
//     refuses a request with an unanswered call.
//   - approval.requested and approval.answered, turn.started and
//     turn.completed themselves, notes, charges and every other kind are
//     not sent.
//
// Within a turn the runtime extends the context with the events it has
// journaled itself (the local replica may lag behind the leader), built
// exactly as the journal holds them.
//
// # Tools
//
// shell runs sh -c in the workspace through package proc: its own process
// group (nothing it starts survives the call), a clean environment, the
// runtime's sandbox (with sandbox = "bwrap" the workspace is the only
// writable place; without it the command can reach whatever the node's
// user can), ShellTimeout. read_file, write_file and list_files work
// through an os.Root on the workspace: a path that escapes it through "..",
// an absolute path elsewhere, or a symlink resolving outside (absolute
// symlinks are never followed) is refused — journaled as a tool.result
// with "refused" — and nothing is read or written. Output is capped at
// MaxToolOutput with a note saying what was cut. A call fak refuses (an
// unknown tool, bad arguments, a path spelled outside) is refused before
// anyone is asked to approve it; a denied call is answered with Denied.
//
// # Metering
//
// The runner charges a turn's first query; each further model call
// charges one query first, and a refusal (BUDGET_EXHAUSTED) ends the turn
// with that error before the call is made. The usage chunk of each call is
// charged as output tokens and spend (prompt × input price + completion ×
// output price, per million tokens); each tool call that ran charges one
// tool call. turn.completed's facts report the model, the model calls, the
// tokens and the context's size (the last prompt).
//
// # Failures
//
// A model call that meets 429, 5xx, a timeout, a lost connection or a
// stream cut is retried up to MaxRetries times, after the endpoint's
// Retry-After (capped at MaxRetryWait) or an exponential backoff — unless
// text of that call already reached the journal. Then, or for 401/403
// (UPSTREAM_AUTH), 404 (UPSTREAM_NOT_FOUND), a malformed chunk
// (UPSTREAM_PROTOCOL) and other refusals, the turn fails with a
// runner.TurnError whose reason is one of the Reason constants and whose
// message carries the upstream status and message. Cancelling the turn
// (an interrupt, the epoch retired) cancels the stream at once.
package model
