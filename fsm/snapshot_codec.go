package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// Compressed snapshots. A snapshot is the whole database, so a node's data
// directory holds its state twice (the database and its latest snapshot)
// and every snapshot writes all of it again. Journals are text — prompts,
// transcripts, tool output, code — which zstd at its fastest level shrinks
// several times over for little CPU, so once every voter's build reads
// them (SnapshotCompressionRules) snapshots are written as one zstd
// stream. Restore reads either form: it looks at the first four bytes,
// the zstd frame magic, which no bbolt file begins with (a bbolt file
// begins with its first meta page's id, 0).
//
// Memory stays small: one encoder goroutine with a 1 MiB window, and a
// decoder of the same window (a snapshot written by this package never
// needs more).

// SnapshotCompressionRules is the rule version from which a build reads
// compressed snapshots: the leader's cluster turns compression on only
// when every voter advertises it (UpgradeBlockers), so no follower is sent
// a snapshot it cannot restore while a fleet is upgraded one node at a
// time.
const SnapshotCompressionRules uint32 = 2

const snapshotWindow = 1 << 20

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// SetSnapshotVoters gives the FSM the Raft voters (the cluster's latest
// configuration): a snapshot is compressed only when every voter's node
// record advertises SnapshotCompressionRules. Without it, never.
func (f *FSM) SetSnapshotVoters(voters func() ([]string, error)) { f.voters.Store(&voters) }

// compressSnapshot decides, in the snapshot's own transaction, whether
// every voter restores a compressed snapshot.
func (f *FSM) compressSnapshot(tx *bolt.Tx) bool {
	vf := f.voters.Load()
	if vf == nil {
		return false
	}
	voters, err := (*vf)()
	if err != nil || len(voters) == 0 {
		return false
	}
	recs, err := nodesIn(tx)
	if err != nil {
		return false
	}
	return len(UpgradeBlockers(SnapshotCompressionRules, voters, recs)) == 0
}

// StateCompressed reports whether the snapshot state in r (from its
// start) is a compressed one.
func StateCompressed(r io.ReaderAt) (bool, error) {
	head := make([]byte, len(zstdMagic))
	n, err := r.ReadAt(head, 0)
	if n < len(head) {
		if err == io.EOF {
			return false, nil
		}
		return false, err
	}
	return bytes.Equal(head, zstdMagic), nil
}

// writeState writes the database as tx sees it to w, compressed or not.
func writeState(w io.Writer, tx *bolt.Tx, compress bool) error {
	if !compress {
		_, err := tx.WriteTo(w)
		return err
	}
	enc, err := zstd.NewWriter(w,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(snapshotWindow),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return err
	}
	var dst io.Writer = enc
	if p, ok := w.(StatePacer); ok {
		dst = &pacedState{w: enc, p: p}
	}
	if _, err := tx.WriteTo(dst); err != nil {
		enc.Close()
		return err
	}
	return enc.Close()
}

// StatePacer is a snapshot sink that paces a compressed snapshot by the
// bytes of state it copies (before compression) rather than the bytes
// written: the copy's reads and CPU are what a paced snapshot bounds.
type StatePacer interface {
	PaceState(n int)
}

type pacedState struct {
	w io.Writer
	p StatePacer
}

func (s *pacedState) Write(b []byte) (int, error) {
	s.p.PaceState(len(b))
	return s.w.Write(b)
}

// readState copies a snapshot's database from r to w, decompressing a
// compressed one.
func readState(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 256<<10)
	head, err := br.Peek(len(zstdMagic))
	if err != nil && err != io.EOF {
		return err
	}
	if !bytes.Equal(head, zstdMagic) {
		_, err := io.Copy(w, br)
		return err
	}
	dec, err := zstd.NewReader(br,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(snapshotWindow))
	if err != nil {
		return err
	}
	defer dec.Close()
	if _, err := io.Copy(w, dec); err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	return nil
}
