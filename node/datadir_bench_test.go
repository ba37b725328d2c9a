package node_test

import (
	"context"
	"encoding/base64"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// BenchmarkDataDir measures the data directory against the journals it
// holds (issue 17: ≤ 2×) with two kinds of event text: Go source with its
// comments (GOROOT's, in file order), what a coding agent's journal is
// mostly made of — prompts, code it read and wrote, tool output — and
// random base64, which nothing compresses: the worst case.
// FAK_DATADIR_EVENTS (1,000,000) events of 256 bytes go to one session in
// appends of 1,000, in two halves, each followed by a snapshot on the
// leader (`fakctl snapshot save`), so the leader ends holding the one
// snapshot Raft retains, its database and the log since; a follower keeps
// what the agent's snapshot policy left it. Run with -benchtime 1x.
func BenchmarkDataDir(b *testing.B) {
	events := int(benchEnv(b, "FAK_DATADIR_EVENTS", 1_000_000, 2000))
	for _, text := range []struct {
		name string
		gen  func(b *testing.B, n int) []string
	}{{"go-source", goSourceText}, {"random", randomText}} {
		b.Run("text="+text.name, func(b *testing.B) {
			texts := text.gen(b, events)
			for i := 0; i < b.N; i++ {
				c, leader, cl, id := policyFleet(b, "datadir")
				half := len(texts) / 2
				for _, part := range [][]string{texts[:half], texts[half:]} {
					appendTexts(b, cl, id, part)
					if _, err := leader.Running().Cluster().SaveSnapshot(context.Background(), io.Discard); err != nil {
						b.Fatal(err)
					}
				}
				journal, total := dataDir(b, c, leader, "the leader, after two snapshots")
				_, follower := dataDir(b, c, c.Followers()[0], "a follower")
				b.ReportMetric(float64(journal)/1e6, "journal-MB")
				b.ReportMetric(float64(total)/float64(journal), "leader-datadir/journal")
				b.ReportMetric(float64(follower)/float64(journal), "follower-datadir/journal")
				c.StopAll()
			}
		})
	}
}

// appendTexts appends texts as notes, 1,000 per call.
func appendTexts(b *testing.B, cl fakv1connect.SessionServiceClient, id string, texts []string) {
	for len(texts) > 0 {
		n := min(len(texts), 1000)
		evs := make([]*fakv1.EventInput, n)
		for i, t := range texts[:n] {
			evs[i] = &fakv1.EventInput{Kind: "note", Text: t}
		}
		if _, err := cl.AppendEvents(context.Background(), connect.NewRequest(&fakv1.AppendEventsRequest{SessionId: id, Events: evs})); err != nil {
			b.Fatal(err)
		}
		texts = texts[n:]
	}
}

// goSourceText cuts GOROOT's Go files, in walk order, into n texts of
// about 256 bytes (cut at a rune boundary), starting over if they run out.
func goSourceText(b *testing.B, n int) []string {
	out := make([]string, 0, n)
	root := filepath.Join(runtime.GOROOT(), "src")
	for len(out) < n {
		before := len(out)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || len(out) >= n {
				return err
			}
			src, err := os.ReadFile(p)
			if err != nil || !utf8.Valid(src) {
				return nil
			}
			for len(src) > 0 && len(out) < n {
				cut := min(256, len(src))
				for cut < len(src) && !utf8.RuneStart(src[cut]) {
					cut--
				}
				out = append(out, string(src[:cut]))
				src = src[cut:]
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if len(out) == before {
			b.Fatalf("no Go source under %s", root)
		}
	}
	return out
}

// randomText is n texts of 256 base64 characters of random bytes.
func randomText(_ *testing.B, n int) []string {
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	raw := make([]byte, 192)
	out := make([]string, n)
	for i := range out {
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		out[i] = base64.StdEncoding.EncodeToString(raw)
	}
	return out
}
