package workspace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Packs: a Snapshot or a fetch stores the chunks it writes in one pack
// file (packs/<id>.pack, the chunks back to back) with an index beside it
// (packs/<id>.idx, one "hash offset length" line per chunk), instead of a
// file per chunk. Creating a file costs far more than writing 100 KB into
// an open one, so a workspace of many small files moves at the speed of
// its bytes, not of its file count.
//
// The index is written (atomically) only after the whole pack, so an
// index always describes bytes that were written; like loose chunks,
// nothing is fsynced and every read is verified: a chunk whose bytes are
// not its hash is forgotten (Missing lists it again; the next Snapshot or
// fetch stores it anew). A pack ages as a whole: any chunk of it being
// re-stored refreshes its mtime, and Remove drops it (and its index) once
// none was for the retention period.

// packLoc is where a packed chunk is.
type packLoc struct {
	pack string // its id
	off  int64
	n    int
}

func (s *Store) packPath(id string) string { return filepath.Join(s.dir, "packs", id+".pack") }
func (s *Store) indexPath(id string) string {
	return filepath.Join(s.dir, "packs", id+".idx")
}

// loadPacks reads every pack index into memory. An index whose pack is
// gone, or that does not parse, is skipped (and swept by Remove).
func (s *Store) loadPacks() error {
	des, err := os.ReadDir(filepath.Join(s.dir, "packs"))
	if err != nil {
		return fmt.Errorf("workspace store: %w", err)
	}
	for _, de := range des {
		id, ok := strings.CutSuffix(de.Name(), ".idx")
		if !ok || strings.HasPrefix(id, ".") {
			continue
		}
		locs, err := s.readIndex(id)
		if err != nil {
			continue
		}
		for h, loc := range locs {
			s.packed[h] = loc
		}
	}
	return nil
}

func (s *Store) readIndex(id string) (map[string]packLoc, error) {
	fi, err := os.Stat(s.packPath(id))
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.indexPath(id))
	if err != nil {
		return nil, err
	}
	locs := map[string]packLoc{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || !isHash(f[0]) {
			return nil, fmt.Errorf("pack index %s: malformed line %q", id, sc.Text())
		}
		off, err1 := strconv.ParseInt(f[1], 10, 64)
		n, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || off < 0 || n < 0 || n > ChunkSize || off+int64(n) > fi.Size() {
			return nil, fmt.Errorf("pack index %s: bad entry %q", id, sc.Text())
		}
		locs[f[0]] = packLoc{pack: id, off: off, n: n}
	}
	return locs, nil
}

// packWriter gathers the chunks of one Snapshot or fetch into one pack.
// Chunks the store already holds are only touched. Not safe for
// concurrent use; several may write to one store at once.
type packWriter struct {
	s       *Store
	f       *os.File
	w       *bufio.Writer
	off     int64
	idx     bytes.Buffer
	locs    map[string]packLoc
	touched map[string]bool // packs already touched by this writer
}

func (s *Store) newPack() *packWriter {
	return &packWriter{s: s, locs: map[string]packLoc{}, touched: map[string]bool{}}
}

// add stores data as chunk h (its sha256, already checked).
func (p *packWriter) add(h string, data []byte) error {
	if _, ok := p.locs[h]; ok || p.touch(h) {
		return nil
	}
	if p.f == nil {
		f, err := os.CreateTemp(filepath.Join(p.s.dir, "packs"), ".tmp-*.pack")
		if err != nil {
			return fmt.Errorf("workspace store: %w", err)
		}
		p.f, p.w = f, bufio.NewWriterSize(f, 4<<20)
	}
	if _, err := p.w.Write(data); err != nil {
		return fmt.Errorf("workspace store: %w", err)
	}
	p.locs[h] = packLoc{off: p.off, n: len(data)}
	fmt.Fprintf(&p.idx, "%s %d %d\n", h, p.off, len(data))
	p.off += int64(len(data))
	return nil
}

// put is add for a chunk from elsewhere, checked like Store.Put.
func (p *packWriter) put(h string, data []byte) error {
	if err := checkChunk(h, data); err != nil {
		return err
	}
	return p.add(h, data)
}

// touch refreshes the chunk h if the store holds it, once per pack.
func (p *packWriter) touch(h string) bool {
	if loc, ok := p.s.packedLoc(h); ok && p.touched[loc.pack] {
		return true
	}
	loc, ok := p.s.touch(h)
	if ok && loc.pack != "" {
		p.touched[loc.pack] = true
	}
	return ok
}

// close finishes the pack: the data in place under its id, then its
// index, then the chunks are the store's. Whatever was added is kept,
// so a fetch broken halfway keeps what it received.
func (p *packWriter) close() error {
	if p.f == nil {
		return nil
	}
	tmp := p.f.Name()
	werr := p.w.Flush()
	if err := errors.Join(werr, p.f.Close()); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("workspace store: %w", err)
	}
	id := sha256Hex(p.idx.Bytes())[:32]
	if err := os.Rename(tmp, p.s.packPath(id)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("workspace store: %w", err)
	}
	if err := writeAtomic(p.s.indexPath(id), p.idx.Bytes()); err != nil {
		_ = os.Remove(p.s.packPath(id))
		return err
	}
	p.s.mu.Lock()
	for h, loc := range p.locs {
		loc.pack = id
		p.s.packed[h] = loc
	}
	p.s.mu.Unlock()
	p.f = nil
	return nil
}

func (s *Store) packedLoc(h string) (packLoc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	loc, ok := s.packed[h]
	return loc, ok
}

// touch reports whether the store holds chunk h, refreshing its mtime (a
// loose chunk's, or its pack's) as a re-stored chunk's would be.
func (s *Store) touch(h string) (packLoc, bool) {
	loc, ok := s.packedLoc(h)
	if !ok {
		return packLoc{}, refresh(s.chunkPath(h)) == nil
	}
	if err := refresh(s.packPath(loc.pack)); err != nil {
		s.forgetPack(loc.pack)
		return packLoc{}, false
	}
	return loc, true
}

// readPacked reads the packed chunk h into buf (nil: a new buffer),
// verified; a chunk that fails is forgotten.
func (s *Store) readPacked(h string, buf []byte) ([]byte, error) {
	loc, ok := s.packedLoc(h)
	if !ok {
		return nil, fmt.Errorf("workspace store: chunk %s missing: %w", h, fs.ErrNotExist)
	}
	f, err := os.Open(s.packPath(loc.pack))
	if err != nil {
		s.forgetPack(loc.pack)
		return nil, fmt.Errorf("workspace store: chunk %s missing (pack %s: %v): %w", h, loc.pack, err, fs.ErrNotExist)
	}
	defer f.Close()
	if len(buf) < loc.n {
		buf = make([]byte, loc.n)
	}
	n, err := f.ReadAt(buf[:loc.n], loc.off)
	if err != nil && !(err == io.EOF && n == loc.n) {
		s.forgetChunk(h)
		return nil, fmt.Errorf("%w: chunk %s altered in the store (pack %s cut short; dropped)", ErrDigestMismatch, h, loc.pack)
	}
	if sha256Hex(buf[:loc.n]) != h {
		s.forgetChunk(h)
		return nil, fmt.Errorf("%w: chunk %s altered in the store (pack %s; dropped)", ErrDigestMismatch, h, loc.pack)
	}
	return buf[:loc.n:loc.n], nil
}

func (s *Store) forgetChunk(h string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.packed, h)
}

func (s *Store) forgetPack(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, loc := range s.packed {
		if loc.pack == id {
			delete(s.packed, h)
		}
	}
}

// removePacks deletes the packs (and their indexes) not touched since
// cutoff, indexes without a pack, and leftover temp files.
func (s *Store) removePacks(cutoff time.Time) error {
	dir := filepath.Join(s.dir, "packs")
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		name := de.Name()
		fi, err := de.Info()
		if err != nil {
			continue
		}
		switch id, isPack := strings.CutSuffix(name, ".pack"); {
		case strings.HasPrefix(name, "."):
			if fi.ModTime().Before(cutoff) {
				_ = os.Remove(filepath.Join(dir, name))
			}
		case isPack:
			if fi.ModTime().Before(cutoff) {
				s.forgetPack(id)
				if err := os.Remove(s.indexPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				if err := os.Remove(s.packPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		default:
			if id, ok := strings.CutSuffix(name, ".idx"); ok {
				if _, err := os.Stat(s.packPath(id)); errors.Is(err, fs.ErrNotExist) {
					_ = os.Remove(filepath.Join(dir, name))
				}
			}
		}
	}
	return nil
}
