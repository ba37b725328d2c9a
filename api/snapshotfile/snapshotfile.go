// Package snapshotfile reads and writes fak snapshot files: the backup of a
// fleet's replicated state that OperatorService.SnapshotSave streams and
// SnapshotRestore takes back. It imports only the API messages and the
// standard library, so fakctl can inspect a file offline without any of the
// server's dependencies.
//
// Layout (version 1):
//
//	magic    8 bytes  "FAKSNAP\n"
//	length   4 bytes  big-endian length N of the header
//	header   N bytes  fak.v1.SnapshotMeta, protobuf
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

	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
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

// WriteHeader writes the magic and meta. The state (meta.Size bytes whose
// SHA-256 is meta.Sha256) must follow.
func WriteHeader(w io.Writer, meta *fakv1.SnapshotMeta) error {
	hdr, err := proto.Marshal(meta)
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
func ReadHeader(r io.Reader) (*fakv1.SnapshotMeta, error) {
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
	meta := &fakv1.SnapshotMeta{}
	if err := proto.Unmarshal(hdr, meta); err != nil {
		return nil, formatErrorf("undecodable header: %v", err)
	}
	if meta.GetVersion() != Version {
		return nil, formatErrorf("unsupported version %d (this build reads version %d)", meta.GetVersion(), Version)
	}
	if len(meta.GetSha256()) != hex.EncodedLen(sha256.Size) {
		return nil, formatErrorf("header has no valid sha256")
	}
	return meta, nil
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
// r to w (io.Discard to only verify) and checks it against meta: exactly
// meta.Size bytes, then end of file, with meta.Sha256. A mismatch is a
// FormatError; w may have received bytes by then, so callers spool to a
// scratch file and use it only when CopyState succeeds.
func CopyState(w io.Writer, r io.Reader, meta *fakv1.SnapshotMeta) error {
	d := NewDigest()
	n, err := io.Copy(io.MultiWriter(w, d), io.LimitReader(r, int64(meta.GetSize())))
	if err != nil {
		return err
	}
	if uint64(n) != meta.GetSize() {
		return formatErrorf("truncated state: %d of %d bytes", n, meta.GetSize())
	}
	var extra [1]byte
	if m, _ := io.ReadFull(r, extra[:]); m > 0 {
		return formatErrorf("unexpected bytes after the %d bytes of state", meta.GetSize())
	}
	if got := d.Sum(); got != meta.GetSha256() {
		return formatErrorf("checksum mismatch: state has sha256 %s, header says %s", got, meta.GetSha256())
	}
	return nil
}
