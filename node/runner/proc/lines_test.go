package proc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	const max = 1 << 20
	long := strings.Repeat("a", max)
	in := "one\r\n\ntwo\n" + long + "\n" + "last"
	r := NewLineReader(strings.NewReader(in), max)
	for i, want := range []string{"one", "", "two", long, "last"} {
		got, err := r.Next()
		if err != nil || string(got) != want {
			t.Fatalf("line %d: %.20q %v, want %.20q", i+1, got, err, want)
		}
		if r.N() != i+1 {
			t.Fatalf("line number %d, want %d", r.N(), i+1)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v", err)
	}

	r = NewLineReader(io.MultiReader(strings.NewReader("ok\n"), bytes.NewReader(bytes.Repeat([]byte("b"), max+1)), strings.NewReader("\n")), max)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next()
	if !errors.Is(err, ErrLineTooLong) || r.N() != 2 {
		t.Fatalf("line %d: %v, want ErrLineTooLong", r.N(), err)
	}
	if want := "longer than 1048576 bytes (1 MiB)"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// The error says the bound, in MiB when it is a whole number of them.
func TestLineTooLongSaysTheBound(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want string
	}{
		{16 << 20, "longer than 16777216 bytes (16 MiB)"},
		{10, "longer than 10 bytes"},
	} {
		_, err := NewLineReader(strings.NewReader(strings.Repeat("x", tc.max+1)+"\n"), tc.max).Next()
		if !errors.Is(err, ErrLineTooLong) || err.Error() != tc.want {
			t.Errorf("max %d: %v, want %q", tc.max, err, tc.want)
		}
	}
}

// Discard drops what follows the lines read, buffered or not.
func TestLineReaderDiscard(t *testing.T) {
	r := NewLineReader(strings.NewReader("result\nrest\nmore"), 1<<10)
	if line, err := r.Next(); err != nil || string(line) != "result" {
		t.Fatalf("%q %v", line, err)
	}
	if n := r.Discard(); n != int64(len("rest\nmore")) {
		t.Fatalf("dropped %d bytes", n)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after Discard: %v", err)
	}
}
