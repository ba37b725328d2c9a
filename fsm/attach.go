package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Limits on attachments: rules of the state machine.
const (
	MaxClientKindBytes   = 64
	MaxClientNameBytes   = 256
	MaxCapabilities      = 64
	MaxCapabilityBytes   = 64
	MaxAttachmentIDBytes = 128
	MinTTL               = int64(1e9)       // 1 s
	MaxTTL               = int64(600 * 1e9) // 10 min
)

func validTTL(ttl int64) *Error {
	if ttl < MinTTL || ttl > MaxTTL {
		return errorf(ReasonInvalidArgument, "ttl must be between 1s and 10m")
	}
	return nil
}

func validAttachmentID(id string) *Error {
	if id == "" {
		return errorf(ReasonInvalidArgument, "attachment id is required")
	}
	if len(id) > MaxAttachmentIDBytes {
		return errorf(ReasonInvalidArgument, "attachment id longer than %d bytes", MaxAttachmentIDBytes)
	}
	return nil
}

func (a *applier) loadAttachment(sessionID, attachmentID string) (*fsmpb.Attachment, *Error) {
	if err := validAttachmentID(attachmentID); err != nil {
		return nil, err
	}
	raw := a.attach.Get(attachmentKey(sessionID, attachmentID))
	if raw == nil {
		return nil, errorf(ReasonAttachmentNotFound, "attachment %s is not attached to session %s (detached or expired)", attachmentID, sessionID)
	}
	var at fsmpb.Attachment
	if err := proto.Unmarshal(raw, &at); err != nil {
		panic("fsm: corrupt attachment record: " + err.Error())
	}
	return &at, nil
}

func (a *applier) putAttachment(at *fsmpb.Attachment) {
	buf, err := proto.Marshal(at)
	if err != nil {
		panic("fsm: marshal attachment: " + err.Error())
	}
	a.must(a.attach.Put(attachmentKey(at.SessionId, at.AttachmentId), buf))
}

func (a *applier) attachClient(c *fsmpb.Command, cmd *fsmpb.Attach) (*fsmpb.Result, *Error) {
	if err := validAttachmentID(cmd.AttachmentId); err != nil {
		return nil, err
	}
	switch {
	case cmd.ClientKind == "" || len(cmd.ClientKind) > MaxClientKindBytes:
		return nil, errorf(ReasonInvalidArgument, "client kind is required (at most %d bytes)", MaxClientKindBytes)
	case len(cmd.ClientName) > MaxClientNameBytes:
		return nil, errorf(ReasonInvalidArgument, "client name longer than %d bytes", MaxClientNameBytes)
	case len(cmd.Capabilities) > MaxCapabilities:
		return nil, errorf(ReasonInvalidArgument, "more than %d capabilities", MaxCapabilities)
	}
	for _, cp := range cmd.Capabilities {
		if cp == "" || len(cp) > MaxCapabilityBytes {
			return nil, errorf(ReasonInvalidArgument, "capability names are 1-%d bytes", MaxCapabilityBytes)
		}
	}
	if err := validTTL(cmd.TtlNanos); err != nil {
		return nil, err
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if a.attach.Get(attachmentKey(s.SessionId, cmd.AttachmentId)) != nil {
		return nil, errorf(ReasonAlreadyExists, "attachment %s already exists", cmd.AttachmentId)
	}
	at := &fsmpb.Attachment{
		SessionId: s.SessionId, AttachmentId: cmd.AttachmentId,
		ClientKind: cmd.ClientKind, ClientName: cmd.ClientName,
		Capabilities: cmd.Capabilities, Node: cmd.Node,
		JoinedUnixNano: c.TimeUnixNano, SeenUnixNano: c.TimeUnixNano,
		ExpiresUnixNano: c.TimeUnixNano + cmd.TtlNanos,
	}
	a.putAttachment(at)
	s.Attachments++
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindAttachmentJoined, cmd.ClientKind+" "+cmd.ClientName, fact(attachmentFact{
		AttachmentID: at.AttachmentId, ClientKind: at.ClientKind, ClientName: at.ClientName,
		Node: at.Node, Capabilities: at.Capabilities,
	})))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Attachment{Attachment: at}}, nil
}

// keepAlive renews presence. It writes no event: presence is ephemeral.
func (a *applier) keepAlive(c *fsmpb.Command, cmd *fsmpb.KeepAlive) (*fsmpb.Result, *Error) {
	if err := validTTL(cmd.TtlNanos); err != nil {
		return nil, err
	}
	if _, err := a.loadSession(cmd.SessionId); err != nil {
		return nil, err
	}
	at, err := a.loadAttachment(cmd.SessionId, cmd.AttachmentId)
	if err != nil {
		return nil, err
	}
	at.SeenUnixNano = c.TimeUnixNano
	at.ExpiresUnixNano = c.TimeUnixNano + cmd.TtlNanos
	a.putAttachment(at)
	return &fsmpb.Result{Body: &fsmpb.Result_Attachment{Attachment: at}}, nil
}

// DetachExpired is the reason the leader's reaper gives; such a detach is a
// no-op unless the attachment has really lapsed at the command's time (a
// keep-alive may have raced it).
const DetachExpired = "expired"

func (a *applier) detach(c *fsmpb.Command, cmd *fsmpb.Detach) (*fsmpb.Result, *Error) {
	if len(cmd.Reason) > MaxReasonBytes {
		return nil, errorf(ReasonInvalidArgument, "reason longer than %d bytes", MaxReasonBytes)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	at, err := a.loadAttachment(s.SessionId, cmd.AttachmentId)
	if err != nil {
		if err.Reason == ReasonAttachmentNotFound {
			return &fsmpb.Result{NoOp: true}, nil // detaching twice changes nothing
		}
		return nil, err
	}
	if cmd.Reason == DetachExpired && at.ExpiresUnixNano > c.TimeUnixNano {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Attachment{Attachment: at}}, nil
	}
	reason := cmd.Reason
	if reason == "" {
		reason = "detached"
	}
	var events []*fsmpb.Event
	if s.Lease != nil && s.Lease.AttachmentId == at.AttachmentId {
		events = append(events, newEvent(s, c, KindLeaseReleased, "lease released: "+reason, fact(leaseFact{
			AttachmentID: at.AttachmentId, ClientKind: at.ClientKind, ClientName: at.ClientName, Reason: reason,
		})))
		s.Lease = nil
	}
	events = append(events, newEvent(s, c, KindAttachmentLeft, at.ClientKind+" "+at.ClientName+" left: "+reason, fact(attachmentFact{
		AttachmentID: at.AttachmentId, ClientKind: at.ClientKind, ClientName: at.ClientName, Node: at.Node, Reason: reason,
	})))
	a.must(a.attach.Delete(attachmentKey(s.SessionId, at.AttachmentId)))
	if s.Attachments > 0 {
		s.Attachments--
	}
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(events...)
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Attachment{Attachment: at}}, nil
}
