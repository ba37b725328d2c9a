package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The stat cache lets a Snapshot of a directory read only the files that
// changed since the last Snapshot (or Materialize) of it: a file whose
// lstat (size, inode, mtime, ctime, mode) is what it was, and whose chunks
// the store still holds, has the chunks it had. It is what keeps a post-turn
// copy of a large workspace with one changed file cheap.
//
// The one hazard is the one git calls "racily clean": timestamps come from
// a coarse kernel clock, so a file changed in the same tick as it was
// statted keeps its timestamps. A file whose ctime is within racyMargin of
// the moment its stat was taken is therefore never trusted: the next
// Snapshot reads it again (and, that stat being older, trusts it after).
// ctime cannot be set by a user, so a backdated mtime does not fool it.

// racyMargin is far above any kernel timestamp granularity (a jiffy).
const racyMargin = 50 * time.Millisecond

// maxCachedDirs bounds the cache: a node snapshots its hosted sessions'
// workspaces; past this many, the least recently used is forgotten (its
// next Snapshot reads everything, nothing worse).
const maxCachedDirs = 1024

type fileStat struct {
	size, mtime, ctime int64
	ino, dev           uint64
	mode               fs.FileMode
}

func statOf(fi fs.FileInfo) (fileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{
		size:  fi.Size(),
		mtime: fi.ModTime().UnixNano(),
		ctime: time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)).UnixNano(), //nolint:unconvert // int32 on some systems
		ino:   st.Ino,
		dev:   uint64(st.Dev), //nolint:unconvert // uint32 on some systems
		mode:  fi.Mode(),
	}, true
}

type cachedFile struct {
	stat   fileStat
	chunks []string
}

// dirCache is what one Snapshot learned: the files' stats as taken before
// they were read (a change while reading moves ctime past it), and when.
type dirCache struct {
	takenAt int64 // unix nanos, before the first stat
	files   map[string]cachedFile
}

type statCache struct {
	mu   sync.Mutex
	dirs map[string]*dirCache
	used map[string]int64 // dir → last use, for eviction
	tick int64
}

func (c *statCache) get(dir string) *dirCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil {
		return nil
	}
	c.tick++
	if d := c.dirs[dir]; d != nil {
		c.used[dir] = c.tick
		return d
	}
	return nil
}

func (c *statCache) put(dir string, d *dirCache) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil {
		c.dirs, c.used = map[string]*dirCache{}, map[string]int64{}
	}
	c.tick++
	c.dirs[dir], c.used[dir] = d, c.tick
	if len(c.dirs) <= maxCachedDirs {
		return
	}
	oldest, at := "", int64(0)
	for k, t := range c.used {
		if oldest == "" || t < at {
			oldest, at = k, t
		}
	}
	delete(c.dirs, oldest)
	delete(c.used, oldest)
}

func (c *statCache) forget(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.dirs, dir)
	delete(c.used, dir)
}

// lookup returns the chunks of the file p if the cache vouches for them:
// same stat, not racy, and every chunk still in the store (its mtime
// refreshed, as a re-stored chunk's would be).
func (d *dirCache) lookup(pw *packWriter, p string, fi fs.FileInfo) ([]string, bool) {
	if d == nil {
		return nil, false
	}
	cf, ok := d.files[p]
	if !ok {
		return nil, false
	}
	st, ok := statOf(fi)
	if !ok || st != cf.stat || cf.stat.ctime >= d.takenAt-int64(racyMargin) {
		return nil, false
	}
	for _, h := range cf.chunks {
		if !pw.touch(h) {
			return nil, false
		}
	}
	return cf.chunks, true
}

// record notes what the file p held when statted as fi.
func (d *dirCache) record(p string, fi fs.FileInfo, chunks []string) {
	if st, ok := statOf(fi); ok {
		d.files[p] = cachedFile{stat: st, chunks: chunks}
	}
}

func cacheKey(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// rememberMaterialized records the files Materialize just wrote at dir,
// so the next Snapshot of it reads none of them once they are no longer
// racy. Best effort: a file it cannot stat is simply read next time.
func (s *Store) rememberMaterialized(dir string, m *Manifest) {
	d := &dirCache{takenAt: time.Now().UnixNano(), files: map[string]cachedFile{}}
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type != TypeFile {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(e.Path)))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != e.Size {
			continue
		}
		d.record(e.Path, fi, e.Chunks)
	}
	s.stats.put(cacheKey(dir), d)
}
