package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Store is a content-addressed store in a directory: chunks by their
// sha256 (chunks/<2 hex>/<hex>, fanned out so no directory gets huge) and
// manifests by their digest (manifests/<hex>). It is safe for concurrent
// use: every write is a temp file renamed into place, so a reader sees a
// whole file or none, and two writers of one hash write the same bytes.
//
// Files are not fsynced: every read verifies what it read, and a chunk
// that fails verification is removed, so a file torn by a crash reads as
// ErrDigestMismatch once and as missing after that (to be fetched or
// snapshotted again), never as content.
type Store struct {
	dir   string
	stats statCache

	mu     sync.Mutex
	packed map[string]packLoc // chunk hash → its place in a pack (pack.go)
}

// OpenStore opens the store in dir, creating it (0700) if needed, and
// reads its pack indexes.
func OpenStore(dir string) (*Store, error) {
	for _, d := range []string{dir, filepath.Join(dir, "chunks"), filepath.Join(dir, "manifests"), filepath.Join(dir, "packs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("workspace store: %w", err)
		}
	}
	s := &Store{dir: dir, packed: map[string]packLoc{}}
	if err := s.loadPacks(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) chunkPath(h string) string { return filepath.Join(s.dir, "chunks", h[:2], h) }

func (s *Store) manifestPath(h string) string { return filepath.Join(s.dir, "manifests", h) }

// Has reports whether the store holds the chunk hash (without verifying
// it: Get does).
func (s *Store) Has(hash string) bool {
	if !isHash(hash) {
		return false
	}
	if _, ok := s.packedLoc(hash); ok {
		return true
	}
	fi, err := os.Lstat(s.chunkPath(hash))
	return err == nil && fi.Mode().IsRegular()
}

// Put stores data as the chunk hash. It refuses a malformed hash or a
// chunk over ChunkSize (*Refusal), and data whose sha256 is not hash
// (ErrDigestMismatch): a peer cannot plant content under another name.
func (s *Store) Put(hash string, data []byte) error {
	if err := checkChunk(hash, data); err != nil {
		return err
	}
	// A chunk already stored is not written again, but its mtime (or its
	// pack's) is refreshed, which is what Remove ages by.
	if _, ok := s.touch(hash); ok {
		return nil
	}
	return writeAtomic(s.chunkPath(hash), data)
}

func checkChunk(hash string, data []byte) error {
	if !isHash(hash) {
		return refuse(clip(hash), "malformed chunk hash")
	}
	if len(data) > ChunkSize {
		return refuse(hash, "chunk of %d bytes exceeds ChunkSize", len(data))
	}
	if got := sha256Hex(data); got != hash {
		return fmt.Errorf("%w: chunk %s: content hashes to %s", ErrDigestMismatch, hash, got)
	}
	return nil
}

// Receiver stores the chunks of one fetch from another node in one pack:
// each Put is verified like Store.Put; Close makes them the store's (and
// must be called even after an error, to keep what arrived).
type Receiver struct{ p *packWriter }

// Receiver starts a fetch into s.
func (s *Store) Receiver() *Receiver { return &Receiver{p: s.newPack()} }

func (r *Receiver) Put(hash string, data []byte) error { return r.p.put(hash, data) }

func (r *Receiver) Close() error { return r.p.close() }

// Get returns the chunk hash, verified: a chunk altered on disk is
// ErrDigestMismatch (and removed, so Missing lists it again); a chunk the
// store lacks is an error wrapping fs.ErrNotExist.
func (s *Store) Get(hash string) ([]byte, error) {
	return s.read(hash, nil)
}

// read is Get into buf (len ChunkSize+1) when buf is not nil, so
// Materialize reads every chunk into one buffer.
func (s *Store) read(hash string, buf []byte) ([]byte, error) {
	if !isHash(hash) {
		return nil, refuse(clip(hash), "malformed chunk hash")
	}
	p := s.chunkPath(hash)
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s.readPacked(hash, buf)
		}
		return nil, fmt.Errorf("workspace store: chunk %s: %w", hash, err)
	}
	defer f.Close()
	if buf == nil {
		// Sized to the file, as a server sends many small chunks.
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("workspace store: chunk %s: %w", hash, err)
		}
		buf = make([]byte, min(fi.Size(), ChunkSize)+1)
	}
	// buf holds one byte more than the chunk may: filling it means the
	// file is longer (than a chunk, or than it was when sized), so it
	// cannot be the chunk, and it is never read whole.
	n, err := io.ReadFull(f, buf[:min(len(buf), ChunkSize+1)])
	switch {
	case err == nil:
		_ = os.Remove(p)
		return nil, fmt.Errorf("%w: chunk %s altered in the store (too long; removed)", ErrDigestMismatch, hash)
	case err != io.EOF && err != io.ErrUnexpectedEOF:
		return nil, fmt.Errorf("workspace store: chunk %s: %w", hash, err)
	}
	if sha256Hex(buf[:n]) != hash {
		_ = os.Remove(p)
		return nil, fmt.Errorf("%w: chunk %s altered in the store (removed)", ErrDigestMismatch, hash)
	}
	return buf[:n:n], nil
}

// Missing is m's chunks the store lacks, sorted: what to fetch before
// Materialize.
func (s *Store) Missing(m *Manifest) []string {
	var missing []string
	for _, h := range m.Chunks() {
		if !s.Has(h) {
			missing = append(missing, h)
		}
	}
	return missing
}

// PutManifest stores m's canonical encoding under its digest and returns
// the digest.
func (s *Store) PutManifest(m *Manifest) (string, error) {
	b := m.Marshal()
	h := sha256Hex(b)
	if err := touchOrWrite(s.manifestPath(h), b); err != nil {
		return "", err
	}
	return digestPrefix + h, nil
}

// ManifestBytes returns the stored encoding of the manifest digest, raw
// for sending to another node, verified like a chunk (an altered manifest
// is ErrDigestMismatch and removed).
func (s *Store) ManifestBytes(digest string) ([]byte, error) {
	h, err := parseDigest(digest)
	if err != nil {
		return nil, err
	}
	p := s.manifestPath(h)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("workspace store: manifest %s missing: %w", digest, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("workspace store: manifest %s: %w", digest, err)
	}
	if sha256Hex(b) != h {
		_ = os.Remove(p)
		return nil, fmt.Errorf("%w: manifest %s altered in the store (removed)", ErrDigestMismatch, digest)
	}
	return b, nil
}

// Manifest returns the stored manifest digest, verified and validated.
func (s *Store) Manifest(digest string) (*Manifest, error) {
	b, err := s.ManifestBytes(digest)
	if err != nil {
		return nil, err
	}
	return VerifyManifest(digest, b)
}

// Remove deletes the chunks, manifests (and leftover temp files) not
// written or re-stored within older. Snapshot re-stores every chunk of the
// tree it takes, so a manifest younger than older has all its chunks; run
// it with older well beyond the longest move, since a Remove racing a
// Snapshot of the same chunks can drop one (Materialize then reports it
// missing).
func (s *Store) Remove(older time.Duration) error {
	cutoff := time.Now().Add(-older)
	if err := s.removePacks(cutoff); err != nil {
		return fmt.Errorf("workspace store: %w", err)
	}
	packs := filepath.Join(s.dir, "packs")
	return filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() && p == packs {
			return filepath.SkipDir // a pack ages with its index: removePacks
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if fi.ModTime().Before(cutoff) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

// touchOrWrite refreshes the mtime of p if it exists (its content is
// named by its hash, so it already holds data) and otherwise writes data
// to p atomically.
func touchOrWrite(p string, data []byte) error {
	if refresh(p) == nil {
		return nil
	}
	return writeAtomic(p, data)
}

// touchAfter is how old an mtime must be before a re-store refreshes it:
// Remove ages by days, and a stat, unlike a metadata write, never waits
// on the file system's journal (a move's checkpoint and restore touch
// the same manifest several times in milliseconds).
const touchAfter = 10 * time.Minute

// refresh makes p's mtime recent, writing it only when it is not; an
// error means p is not there.
func refresh(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	now := time.Now()
	if now.Sub(fi.ModTime()) < touchAfter {
		return nil
	}
	return os.Chtimes(p, now, now)
}

// writeAtomic writes data to a temp file beside p and renames it over p,
// so p is always absent or whole.
func writeAtomic(p string, data []byte) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("workspace store: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("workspace store: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("workspace store: %w", err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("workspace store: %w", err)
	}
	return nil
}
