package guard

import (
	"strings"

	"github.com/fak-dev/fak/internal/tomlquote"
)

// Metering a guarded agent's model calls: the guard points the provider
// at its node's gateway through the launch's path,
//
//	<addr>/gateway/launch/<launch id>/<anthropic|openai|gemini>
//
// so every call is charged to the launch's current default session (a
// clear moves it to the child at once), with no `usage record` call. The
// CLIs' own ways to set a base URL (research notes §1.5, §2.5, §3.5):
//
//	claude  ANTHROPIC_BASE_URL (the gateway adds /v1/messages)
//	codex   -c openai_base_url="…/openai/v1" (Responses API)
//	gemini  GOOGLE_GEMINI_BASE_URL
//
// fak's token travels in X-Fak-Token where the CLI can add a header
// (ANTHROPIC_CUSTOM_HEADERS, GEMINI_CLI_CUSTOM_HEADERS), so the user's own
// provider key still reaches an account with pass_through. Codex cannot
// add a header with openai_base_url: with a token, the guard hands it as
// CODEX_API_KEY unless the user set one, and the gateway calls with the
// account's key.

// gatewayProvider is the gateway route of a provider the guard meters.
var gatewayProvider = map[string]string{"claude": "anthropic", "codex": "openai", "gemini": "gemini"}

// MeterThroughGateway points l's provider at the gateway of the node at
// addr (a base URL) for launch, authenticating with token (may be empty).
// Providers it does not know are left alone.
func MeterThroughGateway(l *Launch, addr, launch, token string) {
	route, ok := gatewayProvider[l.Provider]
	if !ok {
		return
	}
	base := strings.TrimSuffix(addr, "/") + "/gateway/launch/" + launch + "/" + route
	switch l.Provider {
	case "claude":
		l.Env = setEnv(l.Env, "ANTHROPIC_BASE_URL", base)
		if token != "" {
			l.Env = setEnv(l.Env, "ANTHROPIC_CUSTOM_HEADERS", addHeader(l.Env, "ANTHROPIC_CUSTOM_HEADERS", "X-Fak-Token: "+token))
		}
	case "gemini":
		l.Env = setEnv(l.Env, "GOOGLE_GEMINI_BASE_URL", base)
		if token != "" {
			l.Env = setEnv(l.Env, "GEMINI_CLI_CUSTOM_HEADERS", addHeader(l.Env, "GEMINI_CLI_CUSTOM_HEADERS", "X-Fak-Token: "+token))
		}
	case "codex":
		l.Args = insertArgs(l.Args, "-c", "openai_base_url="+tomlquote.String(base+"/v1"))
		if _, set := lookupEnv(l.Env, "CODEX_API_KEY"); token != "" && !set {
			l.Env = setEnv(l.Env, "CODEX_API_KEY", token)
		}
	}
}

// addHeader appends one "Name: value" line to the headers a variable
// already holds (the user's own custom headers stay).
func addHeader(env []string, key, header string) string {
	if v, ok := lookupEnv(env, key); ok && strings.TrimSpace(v) != "" {
		return v + "\n" + header
	}
	return header
}
