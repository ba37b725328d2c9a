package fsm

import (
	"cmp"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Guarded launches (DESIGN.md §6): a `fak guard` run binds a launch to a
// default session; its provider's SessionStart/SessionEnd hooks arrive as
// commands the FSM interprets by the provider table of DESIGN.md §5.

// MaxMetadataBytes bounds the provider fields kept as hook metadata.
const MaxMetadataBytes = 16 << 10

// MaxSeenProviderIDs bounds how many provider ids a launch remembers for
// deduplicating redelivered hooks.
const MaxSeenProviderIDs = 64

func seenProviderID(l *fsmpb.Launch, id string) bool {
	for _, s := range l.SeenProviderIds {
		if s == id {
			return true
		}
	}
	return false
}

// rememberProviderID records id as bound by the launch.
func rememberProviderID(l *fsmpb.Launch, id string) {
	l.ProviderSessionId = id
	if seenProviderID(l, id) {
		return
	}
	l.SeenProviderIds = append(l.SeenProviderIds, id)
	if n := len(l.SeenProviderIds); n > MaxSeenProviderIDs {
		l.SeenProviderIds = l.SeenProviderIds[n-MaxSeenProviderIDs:]
	}
}

func (a *applier) loadLaunch(id string) (*fsmpb.Launch, *Error) {
	if id == "" || len(id) > MaxSessionIDBytes {
		return nil, errorf(ReasonInvalidArgument, "launch id must be 1-%d bytes", MaxSessionIDBytes)
	}
	raw := a.launches.Get([]byte(id))
	if raw == nil {
		return nil, errorf(ReasonNotFound, "launch %s not found", id)
	}
	var l fsmpb.Launch
	if err := proto.Unmarshal(raw, &l); err != nil {
		panic("fsm: corrupt launch " + id + ": " + err.Error())
	}
	return &l, nil
}

func (a *applier) putLaunch(l *fsmpb.Launch) {
	buf, err := proto.Marshal(l)
	if err != nil {
		panic("fsm: marshal launch: " + err.Error())
	}
	a.must(a.launches.Put([]byte(l.LaunchId), buf))
}

// bindLaunch makes session the launch's default session, served from now
// on by the launch's provider process: its placement becomes the external
// runtime of this launch and host. A session that ran on a runtime of the
// fleet (`fak guard --session`) gets a new epoch for it (epoch.changed,
// reason launch), which fences its runner; a turn it had running is
// closed as interrupted by the launch and an open move fails, since no
// runner of the fleet will finish either. Binding again to the same
// session is a no-op.
func (a *applier) bindLaunch(c *fsmpb.Command, cmd *fsmpb.BindLaunch) (*fsmpb.Result, *Error) {
	if cmd.LaunchId == "" || len(cmd.LaunchId) > MaxSessionIDBytes || len(cmd.Provider) > MaxPlacementFieldBytes || len(cmd.Host) > MaxPlacementFieldBytes {
		return nil, errorf(ReasonInvalidArgument, "launch id (1-%d bytes) is required; provider and host are at most %d bytes", MaxSessionIDBytes, MaxPlacementFieldBytes)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	l, lerr := a.loadLaunch(cmd.LaunchId)
	if lerr == nil && l.DefaultSession == s.SessionId {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "no_op", Session: s}}}, nil
	}
	if lerr != nil {
		l = &fsmpb.Launch{LaunchId: cmd.LaunchId, Provider: cmd.Provider, CreatedUnixNano: c.TimeUnixNano}
	}
	l.DefaultSession = s.SessionId
	l.UpdatedUnixNano = c.TimeUnixNano
	a.putLaunch(l)
	ext := &fsmpb.Placement{RuntimeAdapter: ExternalRuntime, Provider: cmp.Or(cmd.Provider, s.Placement.GetProvider()),
		LaunchId: cmd.LaunchId, Host: cmd.Host}
	if !proto.Equal(ext, s.Placement) {
		a.endOpenMove(c, s, "bound to launch "+cmd.LaunchId+": its agent runs outside the fleet")
		bumpEpoch(s)
		s.Placement = ext
		s.Provider = ext.Provider
		s.UpdatedUnixNano = c.TimeUnixNano
		a.putEvents(newEvent(s, c, KindEpochChanged, epochText(s.Epoch, s.Placement)+" (launch)", fact(epochChangeFact{
			Epoch: s.Epoch, Placement: placementFactOf(s.Placement), Reason: "launch",
		})))
		if s.TurnInputSeq != 0 {
			a.closeTurnInterrupted(c, s, "launch "+cmd.LaunchId, interruptByFact{Launch: cmd.LaunchId})
		}
		a.putSession(s)
	}
	return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "bound", Session: s}}}, nil
}

// providerSessionStart interprets a SessionStart hook:
//
//	startup  first: bind the provider id to the default session; the same id
//	         again: no-op; another id: /new (a boundary with source new)
//	resume   same session, a new epoch bound to the provider thread id
//	compact  same session, a compaction event
//	clear    a new logical session (the clear transition); the bound id
//	         again (a redelivery): no-op
//	fork     a fork of the default session, which becomes the default
func (a *applier) providerSessionStart(c *fsmpb.Command, cmd *fsmpb.ProviderSessionStart) (*fsmpb.Result, *Error) {
	if cmd.ProviderSessionId == "" || len(cmd.ProviderSessionId) > MaxSessionIDBytes {
		return nil, errorf(ReasonInvalidArgument, "provider session id must be 1-%d bytes", MaxSessionIDBytes)
	}
	if len(cmd.Metadata) > MaxMetadataBytes {
		return nil, errorf(ReasonInvalidArgument, "hook metadata larger than %d bytes", MaxMetadataBytes)
	}
	l, err := a.loadLaunch(cmd.LaunchId)
	if err != nil {
		return nil, err
	}
	s, err := a.loadSession(l.DefaultSession)
	if err != nil {
		return nil, err
	}
	provider := cmd.Provider
	if provider == "" {
		provider = l.Provider
	}
	pf := providerFact{Provider: provider, Source: cmd.Source, ProviderSessionID: cmd.ProviderSessionId, Launch: l.LaunchId, Metadata: metadataFact(cmd.Metadata)}
	noop := func() (*fsmpb.Result, *Error) {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "no_op", Session: s}}}, nil
	}
	boundary := func(source string) (*fsmpb.Result, *Error) {
		r, err := a.clearSession(c, &fsmpb.ClearSession{SessionId: s.SessionId, Source: source,
			Reason: StopProviderClear, Provider: provider, ProviderSessionId: cmd.ProviderSessionId})
		if err != nil {
			return nil, err
		}
		l.DefaultSession = r.GetBoundary().GetSession().GetSessionId()
		rememberProviderID(l, cmd.ProviderSessionId)
		l.UpdatedUnixNano = c.TimeUnixNano
		a.putLaunch(l)
		return r, nil
	}
	// Any id the launch has acted on before is a redelivery (also a late
	// one, after the launch moved on): nothing changes. Compact carries the
	// bound id by nature and is never a redelivery of a boundary.
	if cmd.Source != "compact" && seenProviderID(l, cmd.ProviderSessionId) {
		return noop()
	}
	switch cmd.Source {
	case "startup":
		switch l.ProviderSessionId {
		case "":
			if err := activeSession(s); err != nil {
				return nil, err
			}
			rememberProviderID(l, cmd.ProviderSessionId)
			l.UpdatedUnixNano = c.TimeUnixNano
			a.putLaunch(l)
			s.Provider, s.ProviderSessionId = provider, cmd.ProviderSessionId
			s.UpdatedUnixNano = c.TimeUnixNano
			a.putEvents(newEvent(s, c, KindProviderBound, provider+" "+cmd.ProviderSessionId, fact(pf)))
			a.putSession(s)
			return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "bound", Session: s}}}, nil
		case cmd.ProviderSessionId:
			return noop()
		}
		return boundary("new")
	case "clear":
		if l.ProviderSessionId == cmd.ProviderSessionId {
			return noop()
		}
		return boundary("clear")
	case "resume":
		if s.ProviderSessionId == cmd.ProviderSessionId {
			return noop()
		}
		if err := activeSession(s); err != nil {
			return nil, err
		}
		bumpEpoch(s)
		s.Provider, s.ProviderSessionId = provider, cmd.ProviderSessionId
		s.UpdatedUnixNano = c.TimeUnixNano
		a.putEvents(newEvent(s, c, KindEpochChanged, epochText(s.Epoch, s.Placement)+" (resume)", fact(epochChangeFact{
			Epoch: s.Epoch, Placement: placementFactOf(s.Placement), Reason: "resume", ProviderSessionID: cmd.ProviderSessionId,
		})))
		a.putSession(s)
		rememberProviderID(l, cmd.ProviderSessionId)
		l.UpdatedUnixNano = c.TimeUnixNano
		a.putLaunch(l)
		return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "resume", Session: s}}}, nil
	case "compact":
		if err := activeSession(s); err != nil {
			return nil, err
		}
		s.UpdatedUnixNano = c.TimeUnixNano
		a.putEvents(newEvent(s, c, KindCompaction, "provider compaction", fact(pf)))
		a.putSession(s)
		return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "compact", Session: s}}}, nil
	case "fork":
		if l.ProviderSessionId == cmd.ProviderSessionId {
			return noop() // a redelivery: the launch already runs in this fork
		}
		r, err := a.forkSession(c, &fsmpb.ForkSession{SourceSessionId: s.SessionId,
			ForkSessionId: ChildSessionID(s.SessionId, cmd.ProviderSessionId), ProviderSessionId: cmd.ProviderSessionId})
		if err != nil {
			return nil, err
		}
		l.DefaultSession = r.GetBoundary().GetSession().GetSessionId()
		rememberProviderID(l, cmd.ProviderSessionId)
		l.UpdatedUnixNano = c.TimeUnixNano
		a.putLaunch(l)
		return r, nil
	}
	return nil, errorf(ReasonInvalidArgument, "unknown SessionStart source %q (startup, resume, clear, compact, fork)", truncate(cmd.Source, 32))
}

// providerSessionEnd records a SessionEnd hook on the launch's default
// session, for audit; it never creates a boundary by itself.
func (a *applier) providerSessionEnd(c *fsmpb.Command, cmd *fsmpb.ProviderSessionEnd) (*fsmpb.Result, *Error) {
	if len(cmd.Metadata) > MaxMetadataBytes || len(cmd.Reason) > MaxReasonBytes || len(cmd.ProviderSessionId) > MaxSessionIDBytes {
		return nil, errorf(ReasonInvalidArgument, "hook fields too large")
	}
	l, err := a.loadLaunch(cmd.LaunchId)
	if err != nil {
		return nil, err
	}
	s, err := a.loadSession(l.DefaultSession)
	if err != nil {
		return nil, err
	}
	provider := cmd.Provider
	if provider == "" {
		provider = l.Provider
	}
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindProviderEnd, provider+" session ended: "+cmd.Reason, fact(providerFact{
		Provider: provider, Reason: cmd.Reason, ProviderSessionID: cmd.ProviderSessionId, Launch: l.LaunchId, Metadata: metadataFact(cmd.Metadata),
	})))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Boundary{Boundary: &fsmpb.Boundary{Action: "end", Session: s}}}, nil
}
