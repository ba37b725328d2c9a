// Package snapshotfile reads and writes fak snapshot files: the backup of a
// fleet's replicated state that cluster.SaveSnapshot writes and
// cluster.RestoreSnapshot verifies and installs (OperatorService streams
// these bytes as they are). It owns the format and its Header type, and
// imports nothing of fak and only the protobuf wire encoding beside the
// standard library, so a client can verify a file offline without any of
// the server's dependencies. The API's fak.v1.SnapshotMeta is the same
// header as a message; package api converts one to the other.
//
// Layout (version 1):
//
//	magic    8 bytes  "FAKSNAP\n"
//	length   4 bytes  big-endian length N of the header
//	header   N bytes  Header in protobuf wire format (header.go)
//	state    size bytes: the FSM database (a bbolt file), SHA-256 in the header
//
// The header comes first so a reader knows what it holds and how to verify
// it before reading the state; the writer therefore spools the state before
// writing the file.
package snapshotfile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Version is the format version this package writes and reads.
const Version = 1

// Magic opens every snapshot file.
const Magic = "FAKSNAP\n"

// maxHeaderBytes bounds the header so a file that is not a snapshot cannot
// make a reader allocate much.
const maxHeaderBytes = 64 << 10

// FormatError: the bytes are not a valid snapshot file of this version
// (wrong magic, unknown version, truncated, checksum mismatch). Nothing was
// restored.
type FormatError struct{ Reason string }

func (e *FormatError) Error() string { return "invalid snapshot file: " + e.Reason }

func formatErrorf(format string, args ...any) error {
	return &FormatError{Reason: fmt.Sprintf(format, args...)}
}

// IsFormatError reports whether err (or one it wraps) is a FormatError.
func IsFormatError(err error) bool {
	var fe *FormatError
	return errors.As(err, &fe)
}

// WriteHeader writes the magic and h. The state (h.Size bytes whose SHA-256
// is h.SHA256) must follow.
func WriteHeader(w io.Writer, h *Header) error {
	hdr, err := h.marshal()
	if err != nil {
		return fmt.Errorf("encode snapshot header: %w", err)
	}
	buf := make([]byte, 0, len(Magic)+4+len(hdr))
	buf = append(buf, Magic...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(hdr)))
	buf = append(buf, hdr...)
	_, err = w.Write(buf)
	return err
}

// ReadHeader reads the magic and header, leaving r at the first byte of the
// state. A file of another format or version is a FormatError.
func ReadHeader(r io.Reader) (*Header, error) {
	var magic [len(Magic)]byte
	n, err := io.ReadFull(r, magic[:])
	if string(magic[:n]) != Magic[:n] {
		return nil, formatErrorf("not a fak snapshot (bad magic)")
	}
	if err != nil {
		return nil, truncated(err, "file too short for a snapshot")
	}
	var length [4]byte
	if _, err := io.ReadFull(r, length[:]); err != nil {
		return nil, truncated(err, "truncated header")
	}
	size := binary.BigEndian.Uint32(length[:])
	if size == 0 || size > maxHeaderBytes {
		return nil, formatErrorf("header length %d out of range", size)
	}
	hdr := make([]byte, size)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, truncated(err, "truncated header")
	}
	h := &Header{}
	if err := h.unmarshal(hdr); err != nil {
		return nil, formatErrorf("undecodable header: %v", err)
	}
	if h.Version != Version {
		return nil, formatErrorf("unsupported version %d (this build reads version %d)", h.Version, Version)
	}
	if len(h.SHA256) != hex.EncodedLen(sha256.Size) {
		return nil, formatErrorf("header has no valid sha256")
	}
	return h, nil
}

// truncated turns an early end of file into a FormatError and passes any
// other read error through.
func truncated(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return formatErrorf("%s", what)
	}
	return err
}

// Digest computes the size and SHA-256 of state bytes written to it, as the
// header records them.
type Digest struct {
	h    hash.Hash
	size uint64
}

// NewDigest returns an empty Digest.
func NewDigest() *Digest { return &Digest{h: sha256.New()} }

func (d *Digest) Write(p []byte) (int, error) {
	d.size += uint64(len(p))
	return d.h.Write(p)
}

// Size is the number of bytes written.
func (d *Digest) Size() uint64 { return d.size }

// Sum is the lowercase hex SHA-256 of the bytes written.
func (d *Digest) Sum() string { return hex.EncodeToString(d.h.Sum(nil)) }

// CopyState copies the state that follows a header read by ReadHeader from
// r to w (io.Discard to only verify) and checks it against h: exactly h.Size
// bytes, then end of file, with h.SHA256. A mismatch is a FormatError; w may
// have received bytes by then, so callers spool to a scratch file and use it
// only when CopyState succeeds.
func CopyState(w io.Writer, r io.Reader, h *Header) error {
	d := NewDigest()
	n, err := io.Copy(io.MultiWriter(w, d), io.LimitReader(r, int64(h.Size)))
	if err != nil {
		return err
	}
	if uint64(n) != h.Size {
		return formatErrorf("truncated state: %d of %d bytes", n, h.Size)
	}
	var extra [1]byte
	if m, _ := io.ReadFull(r, extra[:]); m > 0 {
		return formatErrorf("unexpected bytes after the %d bytes of state", h.Size)
	}
	if got := d.Sum(); got != h.SHA256 {
		return formatErrorf("checksum mismatch: state has sha256 %s, header says %s", got, h.SHA256)
	}
	return nil
}
