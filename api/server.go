package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fak-dev/fak/api/gateway"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/api/web"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// DefaultMaxEventBytes is the default limit on one event's text + data.
const DefaultMaxEventBytes = 1 << 20

var (
	errShuttingDown     = cluster.ErrShutdown
	errLeaveUnsupported = errors.New("leave is not supported by this node")
)

// Config configures the API server of one node.
type Config struct {
	NodeName string
	// APIAddr is this node's advertised API address (host:port).
	APIAddr string
	// Tokens accepted as bearer tokens from the node's tokens file, with
	// their roles; empty disables authentication. ACL tokens in the
	// replicated state are accepted too while it is on.
	Tokens []Token
	// MaxEventBytes limits one event's text + data (default 1 MiB).
	MaxEventBytes int
	// MaxCallsPerCaller bounds one caller's unary calls in flight on this
	// node (default DefaultMaxCallsPerCaller; negative: no limit).
	MaxCallsPerCaller int
	// Limits bound connections, body sizes and body times (httpguard.go).
	Limits Limits
	// LeaseTTL and AttachmentTTL override the input lease and attachment
	// lifetimes (0: the LeaseTTL and AttachmentTTL constants).
	LeaseTTL      time.Duration
	AttachmentTTL time.Duration
	// DefaultPolicy fills the zero fields of a new session's policy.
	DefaultPolicy *fakv1.Policy
	// TLS, when set, serves the API over TLS (HTTP/2 by ALPN, HTTP/1.1)
	// with this configuration; PeerTLS is the client configuration for
	// calls to peers' APIs (https). Both nil: plaintext h2c.
	TLS, PeerTLS *tls.Config
	// Leave makes the node leave the cluster and shut down.
	Leave func() error
	// Blocked lists the sessions of a node the move controller found no
	// node to admit at its last pass (nil: none known). It is asked on the
	// leader only (DrainStatus).
	Blocked func(node string) []BlockedSession
	// Workspaces serves the workspace snapshots this node's store holds to
	// other nodes (a move's destination); nil serves none (NOT_FOUND).
	Workspaces WorkspaceStore
	// CopyWorkspace makes this node hold a copy of a session's workspace
	// snapshot, read from the node that holds it (nil: refused).
	CopyWorkspace func(ctx context.Context, sessionID, digest, from string) (*fsmpb.WorkspaceTransfer, error)
	// Gateway configures the metering gateway served at /gateway/ (nil:
	// served with no account: every call is refused NO_ACCOUNT).
	Gateway *GatewayConfig
	Logger  hclog.Logger
	// Metrics is the node's registry: the API registers its metrics in it
	// and serves it on GET /metrics (nil: a registry of its own).
	Metrics *prometheus.Registry
}

// Server serves the fak.v1 services of one node.
type Server struct {
	cfg        Config
	cluster    *cluster.Cluster
	fsm        *fsm.FSM
	peers      *peerPool
	logger     hclog.Logger
	http       *http.Server
	shutdownCh chan struct{}
	metrics    *apiMetrics
	gateway    *gateway.Handler
	auth       *authInterceptor
	conns      *connMetrics
	// ownSecret is the node's own credential (the first operator token's
	// secret, "" with auth off), read at each use: SetTokens replaces it,
	// so a rotation that removes the old token leaves no caller of the
	// node's own with it (issue 32: a follower's gateway charges).
	ownSecret atomic.Pointer[string]
	// unmeteredQ holds the gateway's charges that could not be committed
	// when their call ended, until they are journaled (issue 32).
	unmeteredQ *unmeteredQueue
}

// New builds the API server over a node's cluster membership and FSM.
func New(cfg Config, c *cluster.Cluster, f *fsm.FSM) *Server {
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = DefaultMaxEventBytes
	}
	if cfg.MaxCallsPerCaller == 0 {
		cfg.MaxCallsPerCaller = DefaultMaxCallsPerCaller
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = LeaseTTL
	}
	if cfg.AttachmentTTL <= 0 {
		cfg.AttachmentTTL = AttachmentTTL
	}
	cfg.Limits = cfg.Limits.withDefaults()
	s := &Server{
		cfg: cfg, cluster: c, fsm: f, peers: newPeerPool(c.DialContext, cfg.PeerTLS),
		logger: cfg.Logger.Named("api"), shutdownCh: make(chan struct{}),
		metrics: newAPIMetrics(cfg.Metrics),
		auth:    newAuthInterceptor(cfg.Tokens, f),
		conns:   newConnMetrics(cfg.Metrics),
	}
	secret, _ := OperatorSecret(cfg.Tokens)
	s.ownSecret.Store(&secret)
	s.unmeteredQ = newUnmeteredQueue(cfg.Metrics)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	p.SetHTTP2(true)
	s.http = &http.Server{
		TLSConfig:         cfg.TLS,
		Handler:           s.Handler(),
		Protocols:         p,
		ReadHeaderTimeout: headerTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// No ReadTimeout or WriteTimeout: they would cut watches. The
		// guard gives each request's body its own deadline instead.
		IdleTimeout: cfg.Limits.IdleTimeout,
		ConnContext: connContext,
		ErrorLog:    s.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	return s
}

// SetTokens replaces the tokens file's tokens the API accepts (a reload:
// fak agent's SIGHUP). Calls already authenticated finish as they are.
// Authentication stays as the node started: with it on, the new tokens
// must include an operator token (the node's own runner calls with it);
// with it off (no tokens file) there is nothing to reload.
func (s *Server) SetTokens(tokens []Token) error {
	if !s.auth.enabled() {
		return errors.New("the node started without a tokens file (authentication off): restart it with --token-file to turn authentication on")
	}
	if _, ok := OperatorSecret(tokens); !ok {
		return errors.New("the tokens file has no operator token: the node's own runner calls its API with the first one")
	}
	s.auth.setFile(tokens)
	secret, _ := OperatorSecret(tokens)
	s.ownSecret.Store(&secret)
	s.unmeteredQ.poke() // a refused credential may be mended
	return nil
}

// OwnSecret is the node's own credential as of now (the first operator
// token of the current tokens file; "" with authentication off).
func (s *Server) OwnSecret() string {
	if p := s.ownSecret.Load(); p != nil {
		return *p
	}
	return ""
}

// Handler returns the HTTP handler with every service mounted.
func (s *Server) Handler() http.Handler {
	messages := newMessageLimits(s.cfg.MaxEventBytes)
	auth := s.auth
	common := []connect.HandlerOption{
		// The limit after auth: an unauthenticated caller is refused
		// before it counts against anyone.
		connect.WithInterceptors(callInterceptor{s}, auth, newCallerLimit(s.cfg.MaxCallsPerCaller)),
		// Responses are small; gzip-compressing each one cost ~8% of the
		// CPU of a loaded fleet. Large pages (ReadEvents) still compress.
		connect.WithCompressMinBytes(8 << 10),
		connect.WithCompression("gzip", newGzipReader, newFastGzipWriter),
	}
	// Connect's read limit caps a message after decompression too, but it
	// is one figure per handler: each service is mounted with the small
	// limit, and a second copy with the bulk one serves bulkProcedures.
	small := append(common[:len(common):len(common)], connect.WithReadMaxBytes(int(messages.small)))
	bulk := append(common[:len(common):len(common)], connect.WithReadMaxBytes(int(messages.bulk)))
	mux := http.NewServeMux()
	mount := func(service func(...connect.HandlerOption) (string, http.Handler)) {
		path, h := service(small...)
		mux.Handle(path, h)
		var bulkHandler http.Handler
		for _, p := range bulkProcedures {
			if strings.HasPrefix(p, path) {
				if bulkHandler == nil {
					_, bulkHandler = service(bulk...)
				}
				mux.Handle(p, bulkHandler)
			}
		}
	}
	mount(func(o ...connect.HandlerOption) (string, http.Handler) {
		return fakv1connect.NewSessionServiceHandler(&sessionHandler{s: s}, o...)
	})
	mount(func(o ...connect.HandlerOption) (string, http.Handler) {
		return fakv1connect.NewClusterServiceHandler(&clusterHandler{s: s}, o...)
	})
	mount(func(o ...connect.HandlerOption) (string, http.Handler) {
		return fakv1connect.NewRunnerServiceHandler(&runnerHandler{s: s}, o...)
	})
	mount(func(o ...connect.HandlerOption) (string, http.Handler) {
		return fakv1connect.NewLifecycleServiceHandler(&lifecycleHandler{s: s}, o...)
	})
	mount(func(o ...connect.HandlerOption) (string, http.Handler) {
		return fakv1connect.NewNodeServiceHandler(&nodeHandler{s: s}, o...)
	})
	mount(func(o ...connect.HandlerOption) (string, http.Handler) {
		return fakv1connect.NewOperatorServiceHandler(&operatorHandler{s: s}, o...)
	})
	mount(func(o ...connect.HandlerOption) (string, http.Handler) {
		return fakv1connect.NewAclServiceHandler(&aclHandler{s: s}, o...)
	})
	services := []string{fakv1connect.SessionServiceName, fakv1connect.ClusterServiceName, fakv1connect.RunnerServiceName, fakv1connect.LifecycleServiceName, fakv1connect.NodeServiceName, fakv1connect.OperatorServiceName, fakv1connect.AclServiceName}
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker(services...), connect.WithReadMaxBytes(plainBodyMax)))
	reflector := grpcreflect.NewStaticReflector(services...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, common[0], connect.WithReadMaxBytes(int(messages.small))))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, common[0], connect.WithReadMaxBytes(int(messages.small))))
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("GET /v1/health/ready", s.ready)
	// The browser page: public static files (no data); its RPCs carry the token.
	mux.Handle(web.Prefix, web.Handler())
	mux.Handle("GET /metrics", auth.requireRole(RoleRead, s.metricsHandler()))
	// The metering gateway authenticates by the provider's own key
	// headers (fak's token, or X-Fak-Token), so it checks them itself.
	s.gateway = s.newGateway(auth)
	mux.Handle(gateway.Prefix, s.gateway)
	// The guard runs before Connect reads a body (httpguard.go).
	return withRequestID(&httpGuard{
		auth: auth, limits: s.cfg.Limits, messages: messages,
		errors: connect.NewErrorWriter(), metrics: s.conns, observe: callInterceptor{s}.end, next: mux,
	})
}

// health answers plain JSON: 200 while the node knows a leader, 503 if not.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	st := s.cluster.Status()
	body := map[string]any{
		"node":          st.Name,
		"raft_state":    st.State,
		"leader":        st.LeaderID,
		"applied_index": st.AppliedIndex,
		"status":        "ok",
	}
	code := http.StatusOK
	if st.LeaderID == "" {
		body["status"] = "no leader"
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// Serve serves HTTP/1.1 and unencrypted HTTP/2 (h2c) on ln, so the Connect,
// gRPC and gRPC-Web protocols all work without TLS.
func (s *Server) Serve(ln net.Listener) error {
	err := s.serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown ends streams and stops the HTTP server.
func (s *Server) Shutdown(ctx context.Context) error {
	select {
	case <-s.shutdownCh:
	default:
		close(s.shutdownCh)
	}
	err := s.http.Shutdown(ctx)
	// Charges of calls that ended are handed to the cluster before the
	// node leaves (each bounded by chargeTimeout).
	if s.gateway != nil {
		done := make(chan struct{})
		go func() { s.gateway.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return err
}

// stampRequestID gives a write its idempotency key: the client's, checked,
// or a fresh one drawn here, before any forwarding or retry.
func (s *Server) stampRequestID(id *string) error {
	if *id == "" {
		*id = NewID("req_")
		return nil
	}
	if len(*id) > fsm.MaxRequestIDBytes {
		return invalidArgument("request_id longer than %d bytes", fsm.MaxRequestIDBytes)
	}
	return nil
}
