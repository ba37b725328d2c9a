package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"

	bolt "go.etcd.io/bbolt"
)

// Content checks. Two databases hold the same replicated state when every
// bucket holds the same keys and values; their files differ anyway, since
// bbolt lays the same content out on different pages run to run. So
// replicas, and a replica and its own rebuild from snapshot + log, are
// compared by a digest of the logical content.

// Content is the digest of an FSM's content at one applied index, taken in
// one read transaction: ApplyBatch writes the applied index in the same
// write transaction as the entries' effects, so the pair is consistent.
type Content struct {
	AppliedIndex uint64
	// Digest is the SHA-256 (hex) of every bucket's name, key count and
	// digest, in bucket order.
	Digest  string
	Buckets []BucketContent
}

// BucketContent is one bucket's part of a Content: its key count and the
// SHA-256 (hex) of its keys and values in key order, each length-prefixed
// (so no two different contents hash the same stream).
type BucketContent struct {
	Name   string
	Keys   uint64
	Digest string
}

// Content digests the whole database. It reads every page once under the
// read lock, like a snapshot: applies go on meanwhile, a Restore waits.
func (f *FSM) Content() (*Content, error) {
	var c *Content
	err := f.view(func(tx *bolt.Tx) error {
		var err error
		c, err = txContent(tx)
		return err
	})
	return c, err
}

// ContentDigest is the applied index and the content digest, consistent
// with each other.
func (f *FSM) ContentDigest() (index uint64, digest string, err error) {
	c, err := f.Content()
	if err != nil {
		return 0, "", err
	}
	return c.AppliedIndex, c.Digest, nil
}

func txContent(tx *bolt.Tx) (*Content, error) {
	c := &Content{}
	if m := tx.Bucket(bucketMeta); m != nil {
		c.AppliedIndex = readU64(m.Get(keyAppliedIndex))
	}
	total := sha256.New()
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		h := sha256.New()
		n, err := hashBucket(h, b, bytes.Equal(name, bucketMeta))
		if err != nil {
			return err
		}
		sum := h.Sum(nil)
		writeField(total, name)
		writeField(total, u64(n))
		writeField(total, sum)
		c.Buckets = append(c.Buckets, BucketContent{Name: string(name), Keys: n, Digest: hex.EncodeToString(sum)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.Digest = hex.EncodeToString(total.Sum(nil))
	return c, nil
}

// hashBucket hashes b's keys and values in key order and returns how many
// keys it holds. The FSM has no nested buckets; one would be hashed in
// place, marked, so that it cannot pass for a key with an empty value.
func hashBucket(h hash.Hash, b *bolt.Bucket, meta bool) (uint64, error) {
	var n uint64
	err := b.ForEach(func(k, v []byte) error {
		if meta && nodeLocal(k) {
			return nil
		}
		n++
		writeField(h, k)
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				h.Write([]byte{0xff})
				_, err := hashBucket(h, nested, false)
				return err
			}
		}
		h.Write([]byte{0})
		writeField(h, v)
		return nil
	})
	return n, err
}

// nodeLocal reports a meta key that describes this node's file, not the
// replicated state (the boot it was opened in, its clean mark): content
// digests leave it out, so replicas on different machines compare equal.
func nodeLocal(k []byte) bool {
	return bytes.Equal(k, keyBoot) || bytes.Equal(k, keyClean)
}

func writeField(h hash.Hash, b []byte) {
	var l [binary.MaxVarintLen64]byte
	h.Write(l[:binary.PutUvarint(l[:], uint64(len(b)))])
	h.Write(b)
}

// BucketDiff is a bucket whose content differs between two Contents, with
// its key count on each side (a bucket missing on one side counts 0 there).
type BucketDiff struct {
	Bucket          string
	Keys, OtherKeys uint64
}

// DiffBuckets lists, in bucket order, the buckets whose digest differs
// between c and other.
func (c *Content) DiffBuckets(other *Content) []BucketDiff {
	var out []BucketDiff
	a, b := c.Buckets, other.Buckets
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0].Name < b[0].Name):
			out = append(out, BucketDiff{Bucket: a[0].Name, Keys: a[0].Keys})
			a = a[1:]
		case len(a) == 0 || b[0].Name < a[0].Name:
			out = append(out, BucketDiff{Bucket: b[0].Name, OtherKeys: b[0].Keys})
			b = b[1:]
		default:
			if a[0].Digest != b[0].Digest || a[0].Keys != b[0].Keys {
				out = append(out, BucketDiff{Bucket: a[0].Name, Keys: a[0].Keys, OtherKeys: b[0].Keys})
			}
			a, b = a[1:], b[1:]
		}
	}
	return out
}

// Kinds of KeyDiff.
const (
	DiffValue     = "value differs"
	DiffOnlyThis  = "only in this one"
	DiffOnlyOther = "only in the other"
)

// KeyDiff is the first key, in bucket and key order, at which two
// databases differ.
type KeyDiff struct {
	Bucket string
	Key    []byte
	Kind   string // DiffValue, DiffOnlyThis or DiffOnlyOther
}

// ErrMovedOn: the FSM is no longer at the applied index a comparison was
// asked for, so its first difference would not be the one that was found.
var ErrMovedOn = errors.New("fsm moved past the compared index")

// FirstDiff walks f and other in bucket and key order, each in one read
// transaction, and returns the first key where they differ (nil: equal).
// When at is not 0, f must still be at applied index at (the live FSM
// keeps applying; other is a rebuild that does not), else ErrMovedOn.
func (f *FSM) FirstDiff(other *FSM, at uint64) (*KeyDiff, error) {
	if other == f {
		return nil, nil // and no second read lock, which a waiting Restore would deadlock
	}
	var d *KeyDiff
	err := f.view(func(ta *bolt.Tx) error {
		if at != 0 && readU64(ta.Bucket(bucketMeta).Get(keyAppliedIndex)) != at {
			return ErrMovedOn
		}
		return other.view(func(tb *bolt.Tx) error {
			d = diffTx(ta, tb)
			return nil
		})
	})
	return d, err
}

func diffTx(ta, tb *bolt.Tx) *KeyDiff {
	ca, cb := ta.Cursor(), tb.Cursor()
	na, _ := ca.First()
	nb, _ := cb.First()
	for na != nil || nb != nil {
		switch cmp := compareKeys(na, nb); {
		case cmp < 0:
			return &KeyDiff{Bucket: string(na), Kind: DiffOnlyThis}
		case cmp > 0:
			return &KeyDiff{Bucket: string(nb), Kind: DiffOnlyOther}
		}
		if d := diffBucket(string(na), ta.Bucket(na), tb.Bucket(nb)); d != nil {
			return d
		}
		na, _ = ca.Next()
		nb, _ = cb.Next()
	}
	return nil
}

func diffBucket(name string, a, b *bolt.Bucket) *KeyDiff {
	ca, cb := a.Cursor(), b.Cursor()
	meta := name == string(bucketMeta)
	// next skips what content digests leave out.
	next := func(c *bolt.Cursor, k, v []byte) ([]byte, []byte) {
		for meta && k != nil && nodeLocal(k) {
			k, v = c.Next()
		}
		return k, v
	}
	ka, va := ca.First()
	ka, va = next(ca, ka, va)
	kb, vb := cb.First()
	kb, vb = next(cb, kb, vb)
	for ka != nil || kb != nil {
		switch cmp := compareKeys(ka, kb); {
		case cmp < 0:
			return &KeyDiff{Bucket: name, Key: bytes.Clone(ka), Kind: DiffOnlyThis}
		case cmp > 0:
			return &KeyDiff{Bucket: name, Key: bytes.Clone(kb), Kind: DiffOnlyOther}
		case !bytes.Equal(va, vb):
			return &KeyDiff{Bucket: name, Key: bytes.Clone(ka), Kind: DiffValue}
		}
		ka, va = ca.Next()
		ka, va = next(ca, ka, va)
		kb, vb = cb.Next()
		kb, vb = next(cb, kb, vb)
	}
	return nil
}

// compareKeys orders keys with nil (the end of a cursor) last.
func compareKeys(a, b []byte) int {
	switch {
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return bytes.Compare(a, b)
}
