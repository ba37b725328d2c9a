package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Materialize makes dir hold exactly m, from the chunks in s. It Validates
// m (maxBytes 0: no limit) and checks every chunk is in s before it writes
// anything; then it builds the tree in a new temp directory beside dir
// (same parent, so the final rename is atomic), verifying every chunk it
// reads (ErrDigestMismatch), setting modes and creating symlinks only with
// validated targets, fsyncs it, and swaps it for dir; the old dir is
// removed. On any error dir is left as it was.
//
// Nothing is ever written through a symlink: Validate guarantees every
// entry's parent is a dir entry, which Materialize itself created in a
// directory nobody else knows, and files and dirs are created exclusively.
func Materialize(dir string, m *Manifest, s *Store, maxBytes int64) error {
	if err := Validate(m, maxBytes); err != nil {
		return err
	}
	if missing := s.Missing(m); len(missing) > 0 {
		return fmt.Errorf("workspace materialize: %d of %d chunks missing, first %s: %w",
			len(missing), len(m.Chunks()), missing[0], fs.ErrNotExist)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("workspace materialize: %w", err)
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("workspace materialize: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(abs)+".new-*")
	if err != nil {
		return fmt.Errorf("workspace materialize: %w", err)
	}
	// Files of the old tree the stat cache vouches for, unchanged and with
	// the chunks and mode the manifest wants, are linked into the new
	// tree instead of written again: the old tree is removed after the
	// swap, so each stays with one name.
	reuse := &reuse{dir: abs, cache: s.stats.get(cacheKey(abs))}
	if err := build(tmp, m, s, reuse); err != nil {
		_ = removeAll(tmp)
		return err
	}
	old, err := replace(abs, tmp)
	if err != nil {
		_ = removeAll(tmp)
		return fmt.Errorf("workspace materialize: %w", err)
	}
	// dir holds m from here on: what follows cannot fail the call. The
	// parent's fsync makes the swap durable; an old dir that cannot be
	// removed is left as a hidden sibling rather than undoing the swap.
	_ = syncDir(parent)
	if old != "" {
		_ = removeAll(old)
	}
	s.rememberMaterialized(abs, m)
	return nil
}

// build creates m's entries under root, a fresh empty directory, in
// manifest order (parents first), and syncs the tree (syncTree) so it
// survives a crash once it is swapped in.
func build(root string, m *Manifest, s *Store, r *reuse) error {
	buf := make([]byte, ChunkSize+1)
	dirs := []string{root}
	var files []string
	for i := range m.Entries {
		e := &m.Entries[i]
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		switch e.Type {
		case TypeDir:
			if err := os.Mkdir(p, 0o700); err != nil {
				return fmt.Errorf("workspace materialize: %w", err)
			}
			// Owner rwx whatever the manifest says: later entries are
			// created inside, and the next Materialize must remove it. The
			// explicit chmod also undoes the umask.
			if err := os.Chmod(p, fs.FileMode(e.Mode|0o700)); err != nil {
				return fmt.Errorf("workspace materialize: %w", err)
			}
			dirs = append(dirs, p)
		case TypeFile:
			if !r.link(e, p) {
				if err := writeFile(p, e, s, buf); err != nil {
					return err
				}
			}
			files = append(files, p)
		case TypeSymlink:
			if err := os.Symlink(e.Target, p); err != nil {
				return fmt.Errorf("workspace materialize: %w", err)
			}
		}
	}
	if err := syncTree(root, files, dirs); err != nil {
		return fmt.Errorf("workspace materialize: %w", err)
	}
	return nil
}

// syncEach fsyncs every file and directory of a tree (where the system
// cannot sync a whole filesystem at once).
func syncEach(files, dirs []string) error {
	for _, p := range append(files, dirs...) {
		if err := syncDir(p); err != nil {
			return err
		}
	}
	return nil
}

// reuse is the tree Materialize replaces, as the stat cache last saw it.
type reuse struct {
	dir   string
	cache *dirCache
}

// link makes p a second name of the old tree's file e.Path if that file
// is, by the cache, exactly e (same chunks, mode, and unchanged since it
// was read), and reports whether it did.
func (r *reuse) link(e *Entry, p string) bool {
	if r.cache == nil {
		return false
	}
	cf, ok := r.cache.files[e.Path]
	if !ok || !slices.Equal(cf.chunks, e.Chunks) || uint32(cf.stat.mode.Perm()) != e.Mode || !cf.stat.mode.IsRegular() ||
		cf.stat.ctime >= r.cache.takenAt-int64(racyMargin) {
		return false
	}
	old := filepath.Join(r.dir, filepath.FromSlash(e.Path))
	fi, err := os.Lstat(old)
	if err != nil {
		return false
	}
	if st, ok := statOf(fi); !ok || st != cf.stat {
		return false
	}
	return os.Link(old, p) == nil
}

// writeFile creates the file e at p from its chunks, each verified by the
// store and checked against the length the manifest implies for it.
func writeFile(p string, e *Entry, s *Store, buf []byte) (err error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("workspace materialize: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("workspace materialize: %w", cerr)
		}
	}()
	for i, h := range e.Chunks {
		data, err := s.read(h, buf)
		if err != nil {
			return fmt.Errorf("workspace materialize: %s: %w", e.Path, err)
		}
		if want := chunkLen(e.Size, i); int64(len(data)) != want {
			return refuse(e.Path, "chunk %d (%s) holds %d bytes, the manifest implies %d", i, h, len(data), want)
		}
		if _, err := f.Write(data); err != nil {
			return fmt.Errorf("workspace materialize: %w", err)
		}
	}
	if err := f.Chmod(fs.FileMode(e.Mode)); err != nil {
		return fmt.Errorf("workspace materialize: %w", err)
	}
	return nil
}

// replace puts the directory tmp at dir and returns where the old dir
// went ("" if there was none). It swaps the two atomically where the
// system can (renameat2 RENAME_EXCHANGE on Linux), else falls back to
// replaceByRenames.
func replace(dir, tmp string) (old string, err error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		// Renaming onto a path created meanwhile still works if it is an
		// empty directory (as runner.Workspace would make).
		return "", os.Rename(tmp, dir)
	} else if err != nil {
		return "", err
	}
	if exchange(tmp, dir) == nil {
		return tmp, nil
	}
	return replaceByRenames(dir, tmp)
}

// replaceByRenames is replace where the two directories cannot be
// swapped: dir goes aside, tmp goes in, and dir comes back if that fails.
// A crash between the two renames leaves dir absent and its old content
// beside it.
func replaceByRenames(dir, tmp string) (old string, err error) {
	old = tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return "", fmt.Errorf("%w (and restoring %s from %s: %v)", err, dir, old, rerr)
		}
		return "", err
	}
	return old, nil
}

// removeAll removes p. An agent can leave directories its owner cannot
// write or read (0o500, 0o000), which os.RemoveAll cannot empty: those are
// opened up (directories only, found without following symlinks) and the
// removal retried.
func removeAll(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// syncDir fsyncs a file or directory by path.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := f.Sync()
	return errors.Join(serr, f.Close())
}
