package api

import (
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

func sessionToAPI(s *fsmpb.Session) *fakv1.Session {
	if s == nil {
		return nil
	}
	return &fakv1.Session{
		SessionId:       s.SessionId,
		Title:           s.Title,
		Objective:       s.Objective,
		State:           fakv1.SessionState(s.State),
		StopReason:      s.StopReason,
		CreatedUnixNano: s.CreatedUnixNano,
		UpdatedUnixNano: s.UpdatedUnixNano,
		HeadSeq:         s.HeadSeq,
	}
}

func eventToAPI(e *fsmpb.Event) *fakv1.Event {
	return &fakv1.Event{
		SessionId:    e.SessionId,
		Seq:          e.Seq,
		Kind:         e.Kind,
		TimeUnixNano: e.TimeUnixNano,
		Text:         e.Text,
		Data:         e.Data,
		RequestId:    e.RequestId,
	}
}

func eventsToAPI(in []*fsmpb.Event) []*fakv1.Event {
	out := make([]*fakv1.Event, len(in))
	for i, e := range in {
		out[i] = eventToAPI(e)
	}
	return out
}

func eventInputsFromAPI(in []*fakv1.EventInput) []*fsmpb.EventInput {
	out := make([]*fsmpb.EventInput, len(in))
	for i, e := range in {
		out[i] = &fsmpb.EventInput{Kind: e.Kind, Text: e.Text, Data: e.Data}
	}
	return out
}
