// Package gateway is the metering gateway every node serves on its API
// port: /gateway/anthropic/…, /gateway/openai/… and /gateway/gemini/…
// forward a model call to the upstream of an account configured on the
// node, stream the answer back as it arrives, read the usage out of it —
// streamed or not — and charge it to a session's budget envelope.
//
// The session is the one X-Trace-Id names, else the current default
// session of the launch the request comes from (X-Fak-Launch, or a
// /gateway/launch/<id>/… path, which is how `fak guard` points a provider
// at it), resolved by the FSM when the charge applies, so a provider's
// clear charges the child at once. An envelope already used up is refused
// in the provider's own error shape (HTTP 429, BUDGET_EXHAUSTED and the
// axis) without contacting the upstream, and the refusal is journaled. An
// upstream failure is passed through and charged nothing; a call the
// client abandons is charged what the upstream reported so far.
//
// Usage per API (../shared/research/agent-runtimes.md §4, §5):
//
//	Anthropic Messages   message_start.message.usage, overwritten by the
//	                     cumulative message_delta.usage; the JSON body's usage
//	OpenAI Chat          the last chunk's usage (the gateway asks for it:
//	                     stream_options.include_usage); the body's usage
//	OpenAI Responses     response.completed's response.usage; the body's usage
//	Gemini               the last usageMetadata of the stream or the body
//
// The package knows HTTP and the providers' formats; what a session, an
// envelope and a refusal are is the Meter's (the API server's, which
// proposes the FSM commands).
package gateway
