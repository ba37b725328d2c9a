package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Snapshot walks dir without following symlinks and returns its manifest,
// having stored every file chunk and the manifest itself in s. It refuses
// (*Refusal) device files, sockets, fifos, a symlink whose target is
// absolute or leaves dir, a name that is not valid UTF-8, and a total file
// size over maxBytes (0: no limit), checked as it goes so a huge tree
// stops early. A missing dir is the empty manifest.
//
// Files are read one chunk at a time through one buffer, so memory stays
// at about ChunkSize whatever the size of the tree. Directory modes are
// recorded with owner rwx set, as Materialize must create them writable.
// The tree should be quiescent (the session checkpointed): a file that
// changes while it is read is snapshotted in some state, but a file
// replaced by something else between its lstat and its open is refused.
//
// A file the last Snapshot or Materialize of dir by this Store saw, and
// that has not changed since (statcache.go), is not read again: its chunks
// are the ones it had, so an unchanged tree costs a walk and some stats.
func Snapshot(dir string, s *Store, maxBytes int64) (*Manifest, error) {
	m, _, err := snapshot(dir, s, maxBytes)
	return m, err
}

// snapshot is Snapshot, also returning the walk (what it read).
func snapshot(dir string, s *Store, maxBytes int64) (*Manifest, *walker, error) {
	key := cacheKey(dir)
	w := &walker{root: dir, store: s, max: maxBytes, cached: s.stats.get(key), pack: s.newPack(),
		seen: &dirCache{takenAt: time.Now().UnixNano(), files: map[string]cachedFile{}}}
	// A refused or failed walk keeps the chunks it stored (no-op after the
	// close below).
	defer func() { _ = w.pack.close() }()
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, nil, fmt.Errorf("workspace snapshot: %w", err)
	case !fi.IsDir():
		return nil, nil, refuse(".", "workspace is not a directory")
	default:
		if err := w.walk(""); err != nil {
			return nil, nil, err
		}
	}
	// The walk is depth-first, which is not byte order of whole paths:
	// "a/b" comes before "a-b" in the walk, after it by bytes.
	slices.SortFunc(w.entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	m := &Manifest{Entries: w.entries}
	// What Snapshot produces must be what Materialize accepts: refuse here,
	// on the source, what the destination would refuse later.
	if err := Validate(m, maxBytes); err != nil {
		return nil, nil, err
	}
	if err := w.pack.close(); err != nil {
		return nil, nil, err
	}
	if _, err := s.PutManifest(m); err != nil {
		return nil, nil, err
	}
	s.stats.put(key, w.seen)
	return m, w, nil
}

type walker struct {
	root    string
	store   *Store
	max     int64
	buf     []byte
	total   int64
	entries []Entry
	pack    *packWriter // the chunks this Snapshot stores
	cached  *dirCache   // the last Snapshot's (or Materialize's) stats
	seen    *dirCache   // this one's
	read    int         // files read (not vouched for by cached)
}

// walk adds the entries of the directory rel ("" is the root).
func (w *walker) walk(rel string) error {
	des, err := os.ReadDir(filepath.Join(w.root, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Errorf("workspace snapshot: %w", err)
	}
	for _, de := range des { // sorted by name, bytewise
		p := de.Name()
		if rel != "" {
			p = rel + "/" + p
		}
		if err := w.add(p); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) add(p string) error {
	if !utf8.ValidString(p) {
		return refuse(p, "name is not valid UTF-8")
	}
	abs := filepath.Join(w.root, filepath.FromSlash(p))
	fi, err := os.Lstat(abs)
	if err != nil {
		return fmt.Errorf("workspace snapshot: %w", err)
	}
	perm := uint32(fi.Mode().Perm()) // setuid, setgid and sticky are not Perm bits
	switch mode := fi.Mode(); {
	case mode.IsDir():
		w.entries = append(w.entries, Entry{Path: p, Type: TypeDir, Mode: perm | 0o700})
		return w.walk(p)
	case mode.IsRegular():
		return w.file(p, abs, fi)
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(abs)
		if err != nil {
			return fmt.Errorf("workspace snapshot: %w", err)
		}
		if why := checkTarget(p, target); why != "" {
			return refuse(p, "%s", why)
		}
		// A symlink's own mode means nothing on Linux (always 0777) and
		// cannot be set portably: record one value so digests agree.
		w.entries = append(w.entries, Entry{Path: p, Type: TypeSymlink, Mode: 0o777, Target: target})
		return nil
	default:
		return refuse(p, "%s cannot be moved", kind(mode))
	}
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a fifo"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "an irregular file"
	}
}

// file adds the regular file p, storing its chunks as it reads them.
func (w *walker) file(p, abs string, fi fs.FileInfo) error {
	if w.max > 0 && fi.Size() > w.max-w.total {
		return refuse(p, "workspace exceeds %d bytes", w.max)
	}
	if chunks, ok := w.cached.lookup(w.pack, p, fi); ok {
		w.total += fi.Size()
		w.entries = append(w.entries, Entry{Path: p, Type: TypeFile, Mode: uint32(fi.Mode().Perm()), Size: fi.Size(), Chunks: chunks})
		w.seen.record(p, fi, chunks)
		return nil
	}
	// O_NOFOLLOW and the SameFile check refuse a file swapped for a
	// symlink after its lstat; O_NONBLOCK keeps a swapped-in fifo from
	// blocking the open.
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("workspace snapshot: %w", err)
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("workspace snapshot: %w", err)
	}
	if !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return refuse(p, "replaced while being read")
	}
	w.read++
	if w.buf == nil {
		w.buf = make([]byte, ChunkSize)
	}
	e := Entry{Path: p, Type: TypeFile, Mode: uint32(ofi.Mode().Perm())}
	for {
		n, err := io.ReadFull(f, w.buf)
		if n > 0 {
			if w.max > 0 && int64(n) > w.max-w.total {
				return refuse(p, "workspace exceeds %d bytes", w.max)
			}
			w.total += int64(n)
			e.Size += int64(n)
			sum := sha256.Sum256(w.buf[:n])
			h := hex.EncodeToString(sum[:])
			if err := w.pack.add(h, w.buf[:n]); err != nil {
				return err
			}
			e.Chunks = append(e.Chunks, h)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("workspace snapshot: %s: %w", p, err)
		}
	}
	w.entries = append(w.entries, e)
	// The stat taken before reading: a change while reading moved ctime
	// past it, so the next Snapshot reads the file again.
	w.seen.record(p, ofi, e.Chunks)
	return nil
}
