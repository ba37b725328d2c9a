// Package workspace moves a session's workspace (the directory its agent's
// files live in, <data-dir>/workspaces/<session-id>) between nodes as
// content-addressed data: Snapshot turns a directory into a Manifest (its
// entries, each file a list of sha256-named chunks) and stores the chunks
// and the manifest in a Store; the manifest's Digest is what a move commits;
// another node fetches the manifest and the chunks it lacks (Store.Missing),
// Puts them into its own Store (each verified against its name) and
// Materializes the manifest into its own directory.
//
// The digest covers paths, types, permission bits, sizes, chunk hashes and
// symlink targets, nothing else (no mtimes, owners or atimes), so the same
// tree has the same digest on every node and a round trip through another
// node reproduces it.
//
// Both ends treat the other as untrusted: Snapshot refuses what cannot be
// moved safely (devices, sockets, fifos, symlinks that leave the
// workspace, an oversized tree) and Materialize refuses any manifest that
// Validate does not accept, so a crafted manifest can never write outside
// its directory nor through a symlink. Every chunk is verified when it is
// put and again when it is read, so corruption on disk or on the wire is
// ErrDigestMismatch, never silently materialized content. Refusals are
// *Refusal errors naming the offending path.
package workspace
