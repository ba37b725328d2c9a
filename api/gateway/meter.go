package gateway

import (
	"bytes"
	"encoding/json"
	"io"
)

// usageReader reads a call's usage out of the response body as it is
// copied to the client: Write sees every byte, Usage what was reported so
// far (a call cut short is charged that much).
type usageReader interface {
	io.Writer
	Usage() Usage
}

// maxLine bounds one SSE line (and a buffered JSON body a reader keeps):
// past it the line is skipped, never the stream.
const maxLine = 8 << 20

// sseReader splits an SSE stream into lines and keeps, for each hint, the
// last data payload that holds it; Usage decodes only those, once, at the
// end (or when a cut-short call is charged). Streaming costs a byte search
// per line, never a JSON decode per chunk.
type sseReader struct {
	hint    [][]byte
	last    [][]byte // per hint: the last payload holding it
	partial []byte
	skip    bool // the current line passed maxLine
}

// payload is the last data payload that held hint i (nil: none).
func (r *sseReader) payload(i int) []byte {
	if i >= len(r.last) {
		return nil
	}
	return r.last[i]
}

func (r *sseReader) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.keep(p)
			break
		}
		line := p[:i]
		if len(r.partial) > 0 || r.skip {
			r.keep(line)
			line = r.partial
		}
		if !r.skip {
			r.line(line)
		}
		r.partial, r.skip = r.partial[:0], false
		p = p[i+1:]
	}
	return n, nil
}

func (r *sseReader) keep(p []byte) {
	if r.skip {
		return
	}
	if len(r.partial)+len(p) > maxLine {
		r.partial, r.skip = r.partial[:0], true
		return
	}
	r.partial = append(r.partial, p...)
}

func (r *sseReader) line(line []byte) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	payload, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	if r.last == nil {
		r.last = make([][]byte, len(r.hint))
	}
	for i, h := range r.hint {
		if bytes.Contains(payload, h) {
			r.last[i] = append(r.last[i][:0], bytes.TrimSpace(payload)...)
			return
		}
	}
}

// bodyReader keeps a whole (bounded) JSON body and reads its usage when
// asked.
type bodyReader struct {
	buf   bytes.Buffer
	over  bool
	parse func(body []byte) Usage
}

func (r *bodyReader) Write(p []byte) (int, error) {
	if !r.over {
		if r.buf.Len()+len(p) > maxLine {
			r.over = true
			r.buf.Reset()
		} else {
			r.buf.Write(p)
		}
	}
	return len(p), nil
}

func (r *bodyReader) Usage() Usage {
	if r.over {
		return Usage{}
	}
	return r.parse(r.buf.Bytes())
}

// decode unmarshals a payload into v, reporting success.
func decode(payload []byte, v any) bool { return json.Unmarshal(payload, v) == nil }
