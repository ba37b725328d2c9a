package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// Exporting a session: its whole history — every event from #1, what a
// reset hid from the model included — as JSON lines (-o jsonl, the
// default) or as one self-contained HTML page a person reads offline
// (-o html); with --lineage, every session of its clear/new/fork tree,
// the root first and each session after its parent. Both forms word the
// events as every client does (journal.Summary).

// Output formats only session export writes.
const (
	outputJSONL = "jsonl"
	outputHTML  = "html"
)

// exportedSession is one session of an export and where it sits in its
// lineage.
type exportedSession struct {
	Session *fakv1.Session
	Parent  string // "" for the root (or a session exported alone)
	Source  string // clear, new, fork
	ForkAt  uint64
	Events  []*fakv1.Event
}

func sessionExportCommand(fs *flag.FlagSet) runFunc {
	lineage := fs.Bool("lineage", false, "export the session's whole clear/new/fork tree, the root first, each session after its parent")
	return func(ctx context.Context, c *cli, args []string) error {
		sessions, err := exportSessions(ctx, c, args[0], *lineage)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			err := readEvents(ctx, c.sessionClient(), s.Session.GetSessionId(), 1, readConsistency(false),
				func(ev *fakv1.Event) error { s.Events = append(s.Events, ev); return nil })
			if err != nil {
				return err
			}
		}
		if c.opts.output == outputHTML {
			return writeExportHTML(c.stdout, sessions, time.Now())
		}
		return writeExportJSONL(c.stdout, sessions)
	}
}

// exportSessions is the session id alone, or its lineage in export order.
func exportSessions(ctx context.Context, c *cli, id string, lineage bool) ([]*exportedSession, error) {
	callCtx, cancel := unaryContext(ctx)
	defer cancel()
	if !lineage {
		resp, err := c.sessionClient().DescribeSession(callCtx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
		if err != nil {
			return nil, err
		}
		s := resp.Msg.GetSession()
		return []*exportedSession{{Session: s, Parent: s.GetParentSession(), Source: s.GetBoundarySource(), ForkAt: s.GetForkAddress()}}, nil
	}
	resp, err := c.sessionClient().GetLineage(callCtx, connect.NewRequest(&fakv1.GetLineageRequest{SessionId: id}))
	if err != nil {
		return nil, err
	}
	nodes := make(map[string]*fakv1.LineageNode, len(resp.Msg.GetNodes()))
	for _, n := range resp.Msg.GetNodes() {
		nodes[n.GetSession().GetSessionId()] = n
	}
	var out []*exportedSession
	seen := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		n, ok := nodes[id]
		if !ok || seen[id] {
			return
		}
		seen[id] = true
		out = append(out, &exportedSession{Session: n.GetSession(), Parent: n.GetParentSession(), Source: n.GetSource(), ForkAt: n.GetForkAddress()})
		for _, child := range n.GetChildren() { // oldest first
			walk(child)
		}
	}
	walk(resp.Msg.GetRoot())
	return out, nil
}

// exportLine is one event of a JSON-lines export.
type exportLine struct {
	SessionID string          `json:"session_id"`
	Seq       uint64          `json:"seq"`
	Time      string          `json:"time"`
	Kind      string          `json:"kind"`
	Text      string          `json:"text,omitempty"`
	Summary   string          `json:"summary"`
	Data      json.RawMessage `json:"data,omitempty"`
	// DataBase64 holds data that is not JSON.
	DataBase64 string `json:"data_base64,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
}

func lineOf(ev *fakv1.Event) exportLine {
	l := exportLine{SessionID: ev.GetSessionId(), Seq: ev.GetSeq(), Kind: ev.GetKind(), Text: ev.GetText(),
		Time: time.Unix(0, ev.GetTimeUnixNano()).UTC().Format(time.RFC3339Nano), Summary: journal.Summary(ev),
		RequestID: ev.GetRequestId()}
	if d := ev.GetData(); len(d) > 0 {
		if json.Valid(d) {
			var b bytes.Buffer
			_ = json.Compact(&b, d)
			l.Data = b.Bytes()
		} else {
			l.DataBase64 = base64.StdEncoding.EncodeToString(d)
		}
	}
	return l
}

func writeExportJSONL(w io.Writer, sessions []*exportedSession) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, s := range sessions {
		for _, ev := range s.Events {
			if err := enc.Encode(lineOf(ev)); err != nil {
				return err
			}
		}
	}
	return nil
}

// htmlEvent is one row of the HTML export.
type htmlEvent struct {
	Seq     uint64
	Time    string
	Kind    string
	Class   string
	Summary string
	Data    string // indented JSON, or base64
}

type htmlSession struct {
	ID, Title, Objective, State string
	Parent, Source              string
	ForkAt                      uint64
	Events                      []htmlEvent
}

func writeExportHTML(w io.Writer, sessions []*exportedSession, now time.Time) error {
	page := struct {
		Root     string
		Exported string
		Sessions []htmlSession
	}{Exported: now.UTC().Format(time.RFC3339)}
	for i, s := range sessions {
		hs := htmlSession{ID: s.Session.GetSessionId(), Title: s.Session.GetTitle(), Objective: s.Session.GetObjective(),
			State: formatSessionState(s.Session.GetState()), Parent: s.Parent, Source: s.Source, ForkAt: s.ForkAt}
		if i == 0 {
			page.Root = hs.ID
		}
		for _, ev := range s.Events {
			l := lineOf(ev)
			data := l.DataBase64
			if len(l.Data) > 0 {
				var b bytes.Buffer
				_ = json.Indent(&b, l.Data, "", "  ")
				data = b.String()
			}
			hs.Events = append(hs.Events, htmlEvent{Seq: l.Seq, Time: l.Time, Kind: l.Kind, Class: kindClass(l.Kind),
				Summary: l.Summary, Data: data})
		}
		page.Sessions = append(page.Sessions, hs)
	}
	return exportTemplate.Execute(w, page)
}

// kindClass groups event kinds for the page's colors.
func kindClass(kind string) string {
	switch {
	case kind == journal.KindInput:
		return "input"
	case kind == journal.KindOutput:
		return "output"
	case kind == journal.KindToolCall || kind == journal.KindToolResult:
		return "tool"
	case kind == journal.KindApprovalRequested || kind == journal.KindApprovalAnswered:
		return "approval"
	case journal.IsMove(kind) || kind == journal.KindMoveWarmed:
		return "move"
	case kind == journal.KindBudgetCharged || kind == journal.KindBudgetExhausted:
		return "budget"
	}
	return "other"
}

// exportTemplate is the whole page: inline style, no script, nothing
// fetched; html/template escapes every value.
var exportTemplate = template.Must(template.New("export").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>fak session {{.Root}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:2em;border-bottom:1px solid #ccc}
.meta{color:#555}table{border-collapse:collapse;width:100%}
td{vertical-align:top;padding:.2em .5em;border-bottom:1px solid #eee}
td.seq,td.time{color:#777;white-space:nowrap;font-variant-numeric:tabular-nums}
td.kind{white-space:nowrap;font-family:monospace}
tr.input td.summary{font-weight:600}tr.output td.summary{white-space:pre-wrap}
tr.tool td.kind{color:#7a4b00}tr.approval td.kind{color:#8a1c7c}tr.move td.kind{color:#0b5cad}tr.budget td.kind{color:#2f6f2f}
pre{margin:.3em 0;white-space:pre-wrap;font-size:12px;background:#f6f6f6;padding:.4em}
</style></head><body>
<h1>fak session {{.Root}}</h1>
<p class="meta">Exported {{.Exported}}: every event of {{len .Sessions}} session(s), including what resets hid from the model.</p>
{{range .Sessions}}<h2 id="{{.ID}}">{{if .Title}}{{.Title}} — {{end}}{{.ID}}</h2>
<p class="meta">{{.State}}{{if .Objective}}; objective: {{.Objective}}{{end}}{{if .Parent}}; {{.Source}} of <a href="#{{.Parent}}">{{.Parent}}</a>{{if .ForkAt}} at #{{.ForkAt}}{{end}}{{end}}</p>
<table>
{{range .Events}}<tr class="{{.Class}}"><td class="seq">#{{.Seq}}</td><td class="time">{{.Time}}</td><td class="kind">{{.Kind}}</td><td class="summary">{{.Summary}}{{if .Data}}<details><summary>data</summary><pre>{{.Data}}</pre></details>{{end}}</td></tr>
{{end}}</table>
{{end}}</body></html>
`))

// exportOutputOK reports whether -o names a format session export writes.
func exportOutputOK(o string) error {
	switch o {
	case outputTable, outputJSON, outputJSONL, outputHTML:
		return nil
	}
	return fmt.Errorf("invalid -o %q: want jsonl or html", o)
}
