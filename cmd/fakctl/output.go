package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func (c *cli) jsonOutput() bool { return c.opts.output == outputJSON }

// printMessage writes msg as indented JSON.
func printMessage(w io.Writer, msg proto.Message) error {
	data, err := marshalMessage(msg)
	if err != nil {
		return err
	}
	return writeIndentedJSON(w, data)
}

// printMessageList writes msgs as an indented JSON array.
func printMessageList[M proto.Message](w io.Writer, msgs []M) error {
	list := make([]json.RawMessage, 0, len(msgs))
	for _, msg := range msgs {
		data, err := marshalMessage(msg)
		if err != nil {
			return err
		}
		list = append(list, data)
	}
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	return writeIndentedJSON(w, data)
}

// printMessageLine writes msg as compact JSON on one line, for streams of
// messages that tools read line by line.
func printMessageLine(w io.Writer, msg proto.Message) error {
	data, err := marshalMessage(msg)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// marshalMessage encodes msg with protojson, omitting unset fields, and
// compacts it: protojson deliberately varies its whitespace between builds,
// and fakctl's output should be stable.
func marshalMessage(msg proto.Message) ([]byte, error) {
	data, err := protojson.MarshalOptions{EmitUnpopulated: false}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return compactJSON(data), nil
}

// compactJSON removes the whitespace outside strings from valid JSON (what
// protojson produces), in place. It is json.Compact without validation,
// which cost `session log -o json` as much as the marshalling.
func compactJSON(data []byte) []byte {
	out := data[:0]
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			continue
		}
		out = append(out, c)
	}
	return out
}

func writeIndentedJSON(w io.Writer, data []byte) error {
	var indented bytes.Buffer
	if err := json.Indent(&indented, data, "", "  "); err != nil {
		return err
	}
	indented.WriteByte('\n')
	_, err := w.Write(indented.Bytes())
	return err
}

// writeTable prints rows in aligned columns under a header.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	writeRow(tw, header)
	for _, row := range rows {
		writeRow(tw, row)
	}
	return tw.Flush()
}

// writeFields prints "Key: value" lines with the values aligned.
func writeFields(w io.Writer, fields [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	for _, field := range fields {
		fmt.Fprintf(tw, "%s:\t%s\n", field[0], tableCell(field[1]))
	}
	return tw.Flush()
}

func writeRow(w io.Writer, cells []string) {
	escaped := make([]string, len(cells))
	for i, cell := range cells {
		escaped[i] = tableCell(cell)
	}
	fmt.Fprintln(w, strings.Join(escaped, "\t"))
}

// tableCell keeps a value on one line and out of tabwriter's way, and shows
// an empty value as "-" so columns stay readable.
func tableCell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(escapeText(s), "\t", " ")
}

var textEscaper = strings.NewReplacer("\n", `\n`, "\r", `\r`)

// escapeText keeps multi-line text on one line.
func escapeText(s string) string { return textEscaper.Replace(s) }

// formatTime renders a Unix nanosecond timestamp as local RFC 3339, or ""
// when unset.
func formatTime(unixNano int64) string {
	if unixNano == 0 {
		return ""
	}
	return time.Unix(0, unixNano).Local().Format(time.RFC3339)
}

// formatSessionState renders SESSION_STATE_ACTIVE as "active".
func formatSessionState(state fakv1.SessionState) string {
	name := strings.TrimPrefix(state.String(), "SESSION_STATE_")
	return strings.ToLower(name)
}

func formatBool(b bool) string { return strconv.FormatBool(b) }

func formatUint(n uint64) string { return strconv.FormatUint(n, 10) }

// writeJSON writes v, a plain Go value, as indented JSON.
func writeJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func joinNonEmpty(parts ...string) string {
	kept := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, " ")
}
