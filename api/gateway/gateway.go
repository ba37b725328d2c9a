package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Providers the gateway speaks.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Gemini    = "gemini"
)

// Prefix is where the gateway is mounted.
const Prefix = "/gateway/"

// Headers a caller sets.
const (
	HeaderTraceID  = "X-Trace-Id"    // the session to charge
	HeaderLaunch   = "X-Fak-Launch"  // else the launch whose default session is charged
	HeaderAccount  = "X-Fak-Account" // which account of the provider to use
	HeaderFakToken = "X-Fak-Token"   // fak's token, when the provider header carries the caller's own key
)

// Account is an `account` block of the node: where a provider's calls go
// and the credential they carry.
type Account struct {
	Name     string
	Provider string // Anthropic, OpenAI or Gemini
	// Upstream is the provider's base URL without a version
	// ("https://api.anthropic.com"); the path after /gateway/<provider>
	// is appended.
	Upstream string
	// Key resolves the account's credential on this node (nil: none).
	Key func() (string, error)
	// PassThrough forwards the caller's own provider key instead, when
	// the caller sends one (and authenticates to fak by X-Fak-Token).
	PassThrough bool
}

// Call is one metered model call as the Meter sees it.
type Call struct {
	Provider, Account string
	TraceID           string // X-Trace-Id: the session to charge
	LaunchID          string // the launch, when there is no trace id
}

// Admission is an admitted call: whom its charge names.
type Admission struct {
	SessionID string // "" when charged through LaunchID
	LaunchID  string
	// Prepaid: admission already charged the call's query. It does when
	// the local replica found the envelope used up and the cluster, asked,
	// charged the query instead of refusing it (the replica was behind a
	// raised limit); the final charge then leaves the query out.
	Prepaid bool
}

// Meter is the gateway's view of the cluster.
type Meter interface {
	// Admit resolves whom a call charges and refuses it (a *Refusal) when
	// its envelope is exhausted, journaling the refusal, or when there is
	// no session to charge.
	Admit(ctx context.Context, c Call) (Admission, error)
	// Charge charges a finished call's usage, incurred: it happened.
	// It must not lose the charge (it retries under requestID) and returns
	// once it is committed, or once it gave up and handed it on to be
	// journaled later (never dropped). The gateway ends the call's answer
	// when Charge returns, or after SettleWait.
	Charge(a Admission, usage *fsmpb.Budget, requestID string)
}

// Options configure the gateway.
type Options struct {
	Accounts []Account
	Prices   PriceTable
	Meter    Meter
	// Authorize checks the caller's fak credential (nil: no auth). A
	// *Refusal it returns is answered as it is (403 for a token whose role
	// may not call); any other error is 401 UNAUTHENTICATED.
	Authorize func(token string) error
	// Client calls the upstreams (nil: a pooled client without timeouts
	// on the body: a stream lasts as long as the model writes).
	Client *http.Client
	Logger hclog.Logger
	// NewRequestID makes a charge's idempotency key.
	NewRequestID func() string
	// Observe, when set, is told how every call ended: Outcome* and the
	// usage read from it (zero when none was).
	Observe func(provider, outcome string, u Usage)
	// SettleWait bounds how long a metered answer's end waits for its
	// charge to commit (0: DefaultSettleWait).
	SettleWait time.Duration
}

// DefaultSettleWait is how long a metered answer's end waits, at most,
// for its charge: a commit takes milliseconds; longer means no leader,
// and the client is not held for an election.
const DefaultSettleWait = 5 * time.Second

func (h *Handler) settleWait() time.Duration {
	if h.o.SettleWait > 0 {
		return h.o.SettleWait
	}
	return DefaultSettleWait
}

// Outcomes of a call, as Options.Observe hears them.
const (
	OutcomeCharged       = "charged"        // metered, answered, charged
	OutcomeRefused       = "refused"        // answered by the gateway itself (budget, auth, no account, …)
	OutcomeUpstreamError = "upstream_error" // the upstream failed or was unreachable: passed through, not charged
	OutcomeUnmetered     = "unmetered"      // not a model call (count_tokens, a GET): passed through
)

func (h *Handler) observe(provider, outcome string, u Usage) {
	if h.o.Observe != nil {
		h.o.Observe(provider, outcome, u)
	}
}

// Handler serves /gateway/.
type Handler struct {
	o  Options
	wg sync.WaitGroup
}

// New returns the gateway handler.
func New(o Options) *Handler {
	if o.Client == nil {
		o.Client = &http.Client{Transport: newTransport()}
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return &Handler{o: o}
}

// route is a parsed gateway path.
type route struct {
	launch, provider string
	rest             string // the upstream path: "/v1/messages"
}

var errNoRoute = errors.New("no such gateway route")

// parseRoute reads /gateway/[launch/<id>/]<provider>/<rest>.
func parseRoute(path string) (route, error) {
	p, ok := strings.CutPrefix(path, Prefix)
	if !ok {
		return route{}, errNoRoute
	}
	var r route
	if after, ok := strings.CutPrefix(p, "launch/"); ok {
		id, tail, ok := strings.Cut(after, "/")
		if !ok || id == "" {
			return route{}, errNoRoute
		}
		r.launch, p = id, tail
	}
	provider, rest, _ := strings.Cut(p, "/")
	switch provider {
	case Anthropic, OpenAI, Gemini:
	default:
		return route{}, errNoRoute
	}
	r.provider, r.rest = provider, "/"+rest
	if strings.Contains(r.rest, "/../") || strings.HasSuffix(r.rest, "/..") {
		return route{}, errNoRoute
	}
	return r, nil
}

// metered reports whether a call to rest is a model call the gateway
// charges (others, like Anthropic's count_tokens, pass through free).
func (r route) metered(method string) bool {
	if method != http.MethodPost {
		return false
	}
	switch r.provider {
	case Anthropic:
		return r.rest == "/v1/messages"
	case OpenAI:
		return r.rest == "/v1/chat/completions" || r.rest == "/v1/responses"
	case Gemini:
		return strings.HasSuffix(r.rest, ":generateContent") || strings.HasSuffix(r.rest, ":streamGenerateContent")
	}
	return false
}

// account picks the account a call uses: the one named, else the first
// of the provider.
func (h *Handler) account(provider, name string) (Account, bool) {
	for _, a := range h.o.Accounts {
		if a.Provider == provider && (name == "" || a.Name == name) {
			return a, true
		}
	}
	return Account{}, false
}

// Wait blocks until every charge the gateway started has been handed to
// the Meter (calls in flight finish first).
func (h *Handler) Wait() { h.wg.Wait() }
