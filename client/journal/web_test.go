package journal

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// webStatic is the browser page every node serves (api/web). The page
// renders events in JavaScript; this vocabulary is the source of truth for
// the kinds it names and the fact fields it reads.
const webStatic = "../../api/web/static"

var (
	jsCase       = regexp.MustCompile(`\bcase "([^"]+)":`)
	jsKindEquals = regexp.MustCompile(`\bkind\s*[!=]==?\s*"([^"]+)"`)
	jsKindPrefix = regexp.MustCompile(`\bkind\.startsWith\("([^"]+)"\)`)
	jsFactField  = regexp.MustCompile(`\b[dp]\.([a-z_]+)\b`)
)

// TestWebPageKinds: every event kind the page names is a kind of the
// journal (a renamed or misspelled kind would silently fall back to the
// page's generic rendering), and every fact field it reads from an event's
// data is a field of a fact here.
func TestWebPageKinds(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(webStatic, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	transcript := read("transcript.js")
	named := map[string]bool{}
	// transcript.js switches on kinds only; the other files compare kinds.
	for _, m := range jsCase.FindAllStringSubmatch(transcript, -1) {
		named[m[1]] = true
	}
	files, err := filepath.Glob(filepath.Join(webStatic, "*.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in %s: %v", webStatic, err)
	}
	for _, f := range files {
		src := read(filepath.Base(f))
		for _, m := range jsKindEquals.FindAllStringSubmatch(src, -1) {
			named[m[1]] = true
		}
		for _, m := range jsKindPrefix.FindAllStringSubmatch(src, -1) {
			if !strings.HasSuffix(m[1], ".") || !hasKindPrefix(m[1]) {
				t.Errorf("%s: kind prefix %q matches no kind of the journal", filepath.Base(f), m[1])
			}
		}
	}
	if len(named) < 10 {
		t.Fatalf("found only %d kinds in the page: has its code changed shape? %v", len(named), named)
	}
	for k := range named {
		if !Known(k) {
			t.Errorf("the page names kind %q, which the journal does not have", k)
		}
	}
	for _, k := range Kinds() {
		if IsMove(k) && !named[k] {
			t.Errorf("the page words every move transition but %s", k)
		}
	}
	var generic []string
	for _, k := range Kinds() {
		if !named[k] {
			generic = append(generic, k)
		}
	}
	t.Logf("kinds the page renders generically (kind: text): %v", generic)

	fields := factFields()
	for _, m := range jsFactField.FindAllStringSubmatch(transcript, -1) {
		if !fields[m[1]] {
			t.Errorf("transcript.js reads fact field %q, which no fact of the journal has", m[1])
		}
	}
}

func hasKindPrefix(prefix string) bool {
	for _, k := range kinds {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// factFields is the JSON name of every field of every fact type.
func factFields() map[string]bool {
	out := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out[name] = true
			walk(f.Type)
		}
	}
	kinds := make([]string, 0, len(decoders))
	for k := range decoders {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		f, _ := decoders[k]([]byte("{}"))
		walk(reflect.TypeOf(f))
	}
	return out
}
