package apiclient

import (
	"io"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster/snapshotfile"
)

// The snapshot file format, header included, belongs to the cluster
// (cluster/snapshotfile); the API shows its header as fak.v1.SnapshotMeta.

// SnapshotMeta is the API message of a snapshot file's header.
func SnapshotMeta(h *snapshotfile.Header) *fakv1.SnapshotMeta {
	if h == nil {
		return nil
	}
	return &fakv1.SnapshotMeta{
		Version:         h.Version,
		Index:           h.Index,
		Term:            h.Term,
		Node:            h.Node,
		CreatedUnixNano: h.CreatedUnixNano,
		Size:            h.Size,
		Sha256:          h.SHA256,
		Sessions:        h.Sessions,
		Events:          h.Events,
		AclTokens:       h.ACLTokens,
	}
}

// VerifySnapshotFile reads a snapshot file from r, checks the state after
// its header against it (size and SHA-256) and returns the header. A file
// that fails is a snapshotfile.FormatError. Here, not in api, so clients (fakctl snapshot
// save and inspect) check a file offline without linking the server.
func VerifySnapshotFile(r io.Reader) (*fakv1.SnapshotMeta, error) {
	h, err := snapshotfile.ReadHeader(r)
	if err != nil {
		return nil, err
	}
	if err := snapshotfile.CopyState(io.Discard, r, h); err != nil {
		return nil, err
	}
	return SnapshotMeta(h), nil
}
