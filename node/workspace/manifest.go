package workspace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ChunkSize is the fixed size files are split into (the last chunk of a
// file is shorter). Fixed boundaries keep chunking deterministic and let a
// manifest's Size be checked against its chunk count.
const ChunkSize = 1 << 20

// Entry types.
const (
	TypeDir     = "dir"
	TypeFile    = "file"
	TypeSymlink = "symlink"
)

// Entry is one thing in a workspace. Paths are slash-separated, relative,
// clean ("a/b.txt"; never "", ".", absolute, or with a ".." element).
type Entry struct {
	Path   string   `json:"path"`
	Type   string   `json:"type"`             // TypeDir, TypeFile or TypeSymlink
	Mode   uint32   `json:"mode"`             // permission bits only (& 0o777)
	Size   int64    `json:"size,omitempty"`   // files
	Target string   `json:"target,omitempty"` // symlinks: relative, resolving inside the workspace
	Chunks []string `json:"chunks,omitempty"` // files: sha256 hex of each chunk, in order
}

// Manifest is a workspace snapshot: its entries sorted by Path (byte
// order), which puts parents before their children.
type Manifest struct {
	Entries []Entry `json:"entries"`
}

// ErrDigestMismatch is content whose hash is not what it was named by (a
// chunk, a manifest). Errors wrap it with the detail.
var ErrDigestMismatch = errors.New("WORKSPACE_DIGEST_MISMATCH")

const digestPrefix = "sha256:"

// Digest is "sha256:" + the hex sha256 of Marshal: the same tree has the
// same digest on every node.
func (m *Manifest) Digest() string {
	sum := sha256.Sum256(m.Marshal())
	return digestPrefix + hex.EncodeToString(sum[:])
}

// Bytes is the sum of the file sizes.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, e := range m.Entries {
		if e.Type == TypeFile {
			n += e.Size
		}
	}
	return n
}

// Chunks is the distinct chunk hashes of m, sorted: what a node needs in
// its store to materialize m.
func (m *Manifest) Chunks() []string {
	var hs []string
	for _, e := range m.Entries {
		hs = append(hs, e.Chunks...)
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}

// Marshal is the canonical encoding the digest is taken over. encoding/json
// writes struct fields in declaration order and the manifest has no maps,
// so the bytes depend on the entries alone; nil and empty slices encode
// alike so that a decoded manifest re-encodes to the same bytes.
func (m *Manifest) Marshal() []byte {
	c := Manifest{Entries: m.Entries}
	if c.Entries == nil {
		c.Entries = []Entry{}
	}
	b, err := json.Marshal(c)
	if err != nil {
		// Only strings, integers and slices of them: encoding cannot fail.
		panic(fmt.Sprintf("workspace: encode manifest: %v", err))
	}
	return b
}

// UnmarshalManifest decodes a manifest and Validates its structure (not
// its size: the caller knows its limit). Unknown fields and trailing data
// are refused: a field this version does not understand could be one the
// sender expected to be honoured.
func UnmarshalManifest(b []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("workspace: decode manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("workspace: decode manifest: trailing data after the manifest")
	}
	if err := Validate(&m, 0); err != nil {
		return nil, err
	}
	return &m, nil
}

// VerifyManifest decodes raw, the bytes of a manifest fetched by its
// digest (from another node or a store), and checks that raw is what
// digest names: its sha256 is digest and it is in canonical form (it
// re-encodes to itself), so the manifest returned is exactly the one that
// was committed.
func VerifyManifest(digest string, raw []byte) (*Manifest, error) {
	want, err := parseDigest(digest)
	if err != nil {
		return nil, err
	}
	if got := sha256Hex(raw); got != want {
		return nil, fmt.Errorf("%w: manifest %s: content hashes to %s%s", ErrDigestMismatch, digest, digestPrefix, got)
	}
	m, err := UnmarshalManifest(raw)
	if err != nil {
		return nil, err
	}
	if got := m.Digest(); got != digest {
		return nil, fmt.Errorf("%w: manifest %s: not in canonical form (re-encodes to %s)", ErrDigestMismatch, digest, got)
	}
	return m, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// isHash reports whether h is a sha256 in lowercase hex, the only spelling
// accepted: one chunk must have one name, and the name becomes a file name
// in the store.
func isHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseDigest returns the hex part of a "sha256:<hex>" manifest digest.
func parseDigest(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, digestPrefix)
	if !ok || !isHash(h) {
		return "", &Refusal{Path: clip(digest), Why: "malformed manifest digest"}
	}
	return h, nil
}

// clip shortens a peer-supplied name for an error message.
func clip(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// ChunkSizes is the length of each distinct chunk of m.
func (m *Manifest) ChunkSizes() map[string]int64 {
	sizes := map[string]int64{}
	for _, e := range m.Entries {
		for i, h := range e.Chunks {
			sizes[h] = chunkLen(e.Size, i)
		}
	}
	return sizes
}
