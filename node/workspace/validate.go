package workspace

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Refusal is hostile or oversized content, refused with a reason and never
// followed. Path is the entry (workspace-relative) it concerns; "." is the
// workspace as a whole.
type Refusal struct{ Path, Why string }

func (r *Refusal) Error() string { return "workspace refused: " + printable(r.Path) + ": " + r.Why }

// printable is p as is, or quoted if it is empty or holds anything that
// would garble a log line (a refused path is, by definition, hostile).
func printable(p string) string {
	if p == "" || !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(p)
	}
	return p
}

func refuse(p, format string, args ...any) *Refusal {
	return &Refusal{Path: p, Why: fmt.Sprintf(format, args...)}
}

// maxLinkHops is the kernel's limit on symlinks followed in one lookup
// (Linux MAXSYMLINKS): past it a lookup fails with ELOOP, reading nothing.
const maxLinkHops = 40

// Validate refuses a manifest that could write outside its directory, or
// through a symlink, or is too big (maxBytes 0: no limit). Materialize
// relies on what it guarantees:
//   - every path is relative, clean, valid UTF-8 without NUL, and has no
//     ".." element;
//   - entries are strictly sorted (no duplicates), and every entry's parent
//     is a dir entry, so nothing is ever created through a symlink or file;
//   - types are known, modes are permission bits only, and an entry
//     carries only its type's fields;
//   - a file's chunks are well-formed hashes that cover its Size exactly
//     (each ChunkSize but the last), and the sizes sum to at most maxBytes;
//   - a symlink's target is relative and stays inside the workspace, both
//     lexically from the link's directory and when followed through the
//     manifest's other symlinks as the kernel would.
func Validate(m *Manifest, maxBytes int64) error {
	if m == nil {
		return refuse(".", "no manifest")
	}
	types := make(map[string]string, len(m.Entries))
	var total int64
	for i := range m.Entries {
		e := &m.Entries[i]
		if err := checkPath(e.Path); err != nil {
			return err
		}
		if i > 0 {
			switch prev := m.Entries[i-1].Path; {
			case e.Path == prev:
				return refuse(e.Path, "duplicate entry")
			case e.Path < prev:
				return refuse(e.Path, "entries not sorted (after %q)", prev)
			}
		}
		// Sorted order puts a parent before its children, so it is known
		// here if it exists at all.
		if dir := path.Dir(e.Path); dir != "." && types[dir] != TypeDir {
			return refuse(e.Path, "parent %q is not a directory entry", dir)
		}
		if e.Mode&^0o777 != 0 {
			return refuse(e.Path, "mode %#o has bits beyond the permissions", e.Mode)
		}
		switch e.Type {
		case TypeDir:
			if e.Size != 0 || len(e.Chunks) != 0 || e.Target != "" {
				return refuse(e.Path, "a directory carries a size, chunks or a target")
			}
		case TypeFile:
			if e.Target != "" {
				return refuse(e.Path, "a file carries a target")
			}
			if err := checkChunks(e); err != nil {
				return err
			}
			if e.Size > math.MaxInt64-total {
				return refuse(e.Path, "sizes overflow")
			}
			total += e.Size
			if maxBytes > 0 && total > maxBytes {
				return refuse(e.Path, "workspace exceeds %d bytes", maxBytes)
			}
		case TypeSymlink:
			if e.Size != 0 || len(e.Chunks) != 0 {
				return refuse(e.Path, "a symlink carries a size or chunks")
			}
			if why := checkTarget(e.Path, e.Target); why != "" {
				return refuse(e.Path, "%s", why)
			}
		default:
			return refuse(e.Path, "unknown type %q", clip(e.Type))
		}
		types[e.Path] = e.Type
	}
	// Following symlinks needs the whole tree: a target may name a later
	// entry.
	var targets map[string]string
	for _, e := range m.Entries {
		if e.Type != TypeSymlink {
			continue
		}
		if targets == nil {
			targets = make(map[string]string)
			for _, l := range m.Entries {
				if l.Type == TypeSymlink {
					targets[l.Path] = l.Target
				}
			}
		}
		if !followsInside(e.Path, e.Target, types, targets) {
			return refuse(e.Path, "symlink target %q leaves the workspace through another symlink", e.Target)
		}
	}
	return nil
}

// checkPath refuses an entry path that is not a clean relative path inside
// the workspace.
func checkPath(p string) error {
	switch {
	case p == "":
		return refuse(p, "empty path")
	case strings.IndexByte(p, 0) >= 0:
		return refuse(p, "path contains NUL")
	case !utf8.ValidString(p):
		// JSON cannot carry it faithfully: two names could become one.
		return refuse(p, "path is not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return refuse(p, "absolute path")
	case p == ".":
		return refuse(p, "path names the workspace itself")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return refuse(p, "path has a \"..\" element")
		}
	}
	if path.Clean(p) != p {
		return refuse(p, "path is not clean")
	}
	return nil
}

// checkChunks refuses a file whose chunks are malformed or do not cover
// its Size: the sizes of its chunks are implied (ChunkSize each but the
// last), which is what lets Materialize check every chunk's length.
func checkChunks(e *Entry) error {
	if e.Size < 0 {
		return refuse(e.Path, "negative size %d", e.Size)
	}
	want := e.Size / ChunkSize
	if e.Size%ChunkSize != 0 {
		want++
	}
	if int64(len(e.Chunks)) != want {
		return refuse(e.Path, "%d chunks do not cover %d bytes (want %d)", len(e.Chunks), e.Size, want)
	}
	for i, h := range e.Chunks {
		if !isHash(h) {
			return refuse(e.Path, "chunk %d: malformed hash %q", i, clip(h))
		}
	}
	return nil
}

// chunkLen is the length chunk i of a file of size bytes must have.
func chunkLen(size int64, i int) int64 {
	if rest := size - int64(i)*ChunkSize; rest < ChunkSize {
		return rest
	}
	return ChunkSize
}

// checkTarget returns why a symlink at link may not point at target, or ""
// if it may: the target must be relative and resolve, lexically from the
// link's own directory, inside the workspace. Both Snapshot (as it walks)
// and Validate use it.
func checkTarget(link, target string) string {
	switch {
	case target == "":
		return "empty symlink target"
	case strings.IndexByte(target, 0) >= 0:
		return "symlink target contains NUL"
	case !utf8.ValidString(target):
		return "symlink target is not valid UTF-8"
	case strings.HasPrefix(target, "/"):
		return fmt.Sprintf("absolute symlink target %q", clip(target))
	}
	if r := path.Clean(path.Join(path.Dir(link), target)); r == ".." || strings.HasPrefix(r, "../") {
		return fmt.Sprintf("symlink target %q leaves the workspace", clip(target))
	}
	return ""
}

// followsInside resolves target from link's directory the way the kernel
// would, following the manifest's symlinks, and reports whether the
// resolution stays inside the workspace. The lexical check alone is not
// enough: with "d/up" -> ".." (inside), "esc" -> "d/up/.." is lexically
// "d" but really the workspace's parent, because ".." after a symlink
// climbs from where the symlink points. Components the manifest does not
// have are taken lexically (a lookup through them fails anyway).
func followsInside(link, target string, types, targets map[string]string) bool {
	var at []string // the directory reached, as components from the root
	if d := path.Dir(link); d != "." {
		at = strings.Split(d, "/")
	}
	todo := strings.Split(target, "/")
	hops := 0
	for len(todo) > 0 {
		el := todo[0]
		todo = todo[1:]
		switch el {
		case "", ".":
		case "..":
			if len(at) == 0 {
				return false
			}
			at = at[:len(at)-1]
		default:
			at = append(at, el)
			p := strings.Join(at, "/")
			if types[p] != TypeSymlink {
				continue
			}
			if hops++; hops > maxLinkHops {
				return true // ELOOP: the lookup reads nothing
			}
			at = at[:len(at)-1]
			t := targets[p]
			if strings.HasPrefix(t, "/") {
				return false
			}
			todo = append(strings.Split(t, "/"), todo...)
		}
	}
	return true
}
