package term

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// noticePrefix starts every line the client prints on its own account (not
// an event), so a transcript tells the journal from the client's remarks.
const noticePrefix = "-- "

// renderer turns events into transcript lines: "#SEQ " and the summary
// every client prints for the event (journal.Summary), in which this
// client is "you". It is a small state machine: the chunks of an agent's
// reply are printed as they arrive on one line that starts with the
// address of the first chunk, and any other line (event or notice) first
// ends the open reply.
type renderer struct {
	// self holds this client's attachment ids (more than one after it had
	// to attach again).
	self  map[string]bool
	style journal.Style
	// inReply: the last thing printed was an output chunk, so the next chunk
	// continues it. open: the last line printed has no newline yet.
	inReply bool
	open    bool
}

func newRenderer() *renderer {
	r := &renderer{self: make(map[string]bool)}
	r.style.Name = r.name
	return r
}

// addSelf marks an attachment id as this client's own.
func (r *renderer) addSelf(attachmentID string) { r.self[attachmentID] = true }

// name names this client "you" in summaries; others keep their names.
func (r *renderer) name(c journal.Client) string {
	if c.AttachmentID != "" && r.self[c.AttachmentID] {
		return "you"
	}
	return ""
}

// breakLine ends an open reply line, if any.
func (r *renderer) breakLine() string {
	r.inReply = false
	if r.open {
		r.open = false
		return "\n"
	}
	return ""
}

// notice renders a remark of the client as one line.
func (r *renderer) notice(msg string) string {
	return r.breakLine() + noticePrefix + singleLine(msg) + "\n"
}

// render returns the text for one event: its lines, each starting with the
// event's address, except continued output chunks.
func (r *renderer) render(ev *fakv1.Event) string {
	if ev.GetKind() == journal.KindOutput {
		return r.renderOutput(ev)
	}
	prefix := r.breakLine()
	return prefix + r.line(ev) + "\n"
}

func (r *renderer) renderOutput(ev *fakv1.Event) string {
	text := ev.GetText()
	var b strings.Builder
	if !r.inReply {
		b.WriteString(r.breakLine())
		fmt.Fprintf(&b, "#%d agent> ", ev.GetSeq())
		r.inReply = true
		r.open = true
	}
	if text == "" {
		return b.String()
	}
	b.WriteString(text)
	r.open = !strings.HasSuffix(text, "\n")
	return b.String()
}

// line renders every event but output: its address and its summary,
// multi-line texts continued on indented lines; an approval request asks
// for the answer the input loop takes.
func (r *renderer) line(ev *fakv1.Event) string {
	s := "#" + strconv.FormatUint(ev.GetSeq(), 10) + " " + indentRest(r.style.Summary(ev))
	if ev.GetKind() == journal.KindApprovalRequested {
		s += " [y/n]"
	}
	return s
}

// indentRest keeps a multi-line text readable under its address: lines
// after the first are indented, and a trailing newline is dropped.
func indentRest(s string) string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	return strings.ReplaceAll(s, "\n", "\n    ")
}

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

func singleLine(s string) string { return lineBreaks.Replace(strings.TrimSpace(s)) }

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// transcript serializes everything the client prints on stdout: events from
// the watch, notices from the input loop and the keep-alive goroutines.
type transcript struct {
	mu sync.Mutex
	w  io.Writer
	r  *renderer
}

func newTranscript(w io.Writer) *transcript {
	return &transcript{w: w, r: newRenderer()}
}

func (t *transcript) event(ev *fakv1.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, t.r.render(ev))
}

func (t *transcript) notice(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, t.r.notice(fmt.Sprintf(format, args...)))
}

// raw prints text as is (the header), after ending an open reply.
func (t *transcript) raw(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, t.r.breakLine()+text)
}

// finish ends an open reply line before the client exits.
func (t *transcript) finish() { t.raw("") }

func (t *transcript) addSelf(attachmentID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.addSelf(attachmentID)
}
