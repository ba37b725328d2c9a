package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// Backups of the fleet's replicated state (OperatorService): save streams a
// snapshot file from the leader, restore sends one back, inspect reads one
// offline.

// snapshotChunkBytes is the size of the chunks restore sends.
const snapshotChunkBytes = 256 << 10

// progressEvery is how many bytes pass between two progress lines.
var progressEvery int64 = 16 << 20

func (c *cli) operatorClient() fakv1connect.OperatorServiceClient {
	return fakv1connect.NewOperatorServiceClient(c.httpClient, c.baseURL, c.clientOpts...)
}

func snapshotSaveCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		path := args[0]
		tmp := path + ".tmp"
		stream, err := c.operatorClient().SnapshotSave(ctx, connect.NewRequest(&fakv1.SnapshotSaveRequest{}))
		if err != nil {
			return err
		}
		defer stream.Close()
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		ok := false
		defer func() {
			if !ok {
				f.Close()
				os.Remove(tmp)
			}
		}()
		progress := &progressWriter{w: c.stderr, what: "received"}
		for stream.Receive() {
			data := stream.Msg().GetData()
			if _, err := f.Write(data); err != nil {
				return err
			}
			progress.add(len(data))
		}
		if err := stream.Err(); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		// Check what arrived before it replaces anything.
		meta, err := verifySnapshotFile(tmp)
		if err != nil {
			return fmt.Errorf("received file does not verify: %w", err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		ok = true
		if c.jsonOutput() {
			return printMessage(c.stdout, meta)
		}
		fmt.Fprintf(c.stdout, "Saved snapshot to %s\n", path)
		return writeFields(c.stdout, snapshotFields(meta))
	}
}

func snapshotRestoreCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		stream := c.operatorClient().SnapshotRestore(ctx)
		progress := &progressWriter{w: c.stderr, what: "sent"}
		buf := make([]byte, snapshotChunkBytes)
		for {
			n, rerr := io.ReadFull(f, buf)
			if n > 0 {
				if err := stream.Send(&fakv1.SnapshotRestoreRequest{Data: buf[:n]}); err != nil {
					// The server stopped reading; its answer says why.
					_, err = stream.CloseAndReceive()
					return err
				}
				progress.add(n)
			}
			if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
				break
			}
			if rerr != nil {
				_, _ = stream.CloseAndReceive()
				return rerr
			}
		}
		resp, err := stream.CloseAndReceive()
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		fmt.Fprintf(c.stdout, "Restored snapshot %s; the fleet is at index %d\n", args[0], resp.Msg.GetRestoredIndex())
		return writeFields(c.stdout, snapshotFields(resp.Msg.GetMeta()))
	}
}

func snapshotInspectCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		meta, err := verifySnapshotFile(args[0])
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, meta)
		}
		return writeFields(c.stdout, append(snapshotFields(meta), [2]string{"Checksum", "ok"}))
	}
}

// verifySnapshotFile reads a snapshot file's header and checks its state
// against it (size and SHA-256).
func verifySnapshotFile(path string) (*fakv1.SnapshotMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return apiclient.VerifySnapshotFile(f)
}

func snapshotFields(m *fakv1.SnapshotMeta) [][2]string {
	return [][2]string{
		{"Version", formatUint(uint64(m.GetVersion()))},
		{"Index", formatUint(m.GetIndex())},
		{"Term", formatUint(m.GetTerm())},
		{"Node", m.GetNode()},
		{"Created", formatTime(m.GetCreatedUnixNano())},
		{"Size", formatUint(m.GetSize())},
		{"SHA-256", m.GetSha256()},
		{"Sessions", formatUint(m.GetSessions())},
		{"Events", formatUint(m.GetEvents())},
		{"ACL tokens", formatUint(m.GetAclTokens())},
	}
}

// progressWriter reports on stderr, every progressEvery bytes, how much of
// a long transfer went through.
type progressWriter struct {
	w          io.Writer
	what       string
	total, due int64
}

func (p *progressWriter) add(n int) {
	p.total += int64(n)
	if p.total-p.due >= progressEvery {
		p.due = p.total
		fmt.Fprintf(p.w, "%s %.1f MiB\n", p.what, float64(p.total)/(1<<20))
	}
}
