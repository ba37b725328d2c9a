package fsm

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

func createACL(accessor, secret, role, description string) *fsmpb.Command {
	sum := sha256.Sum256([]byte(secret))
	return &fsmpb.Command{Body: &fsmpb.Command_CreateAclToken{CreateAclToken: &fsmpb.CreateAclToken{
		AccessorId: accessor, SecretSha256: sum[:], Role: role, Description: description,
	}}}
}

func revokeACL(accessor string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RevokeAclToken{RevokeAclToken: &fsmpb.RevokeAclToken{AccessorId: accessor}}}
}

func lookupACL(t *testing.T, f *FSM, secret string) *fsmpb.AclToken {
	t.Helper()
	sum := sha256.Sum256([]byte(secret))
	rec, err := f.LookupAclToken(sum[:])
	if err != nil {
		t.Fatalf("LookupAclToken: %v", err)
	}
	return rec
}

// TestAclTokenLifecycle: a created token is found by its secret's hash with
// its role and the command's time; list shows it; a revoke makes lookups
// fail and the accessor unknown.
func TestAclTokenLifecycle(t *testing.T) {
	h := newHarness(t)
	r := h.apply1(createACL("acc_1", "s3cret", RoleAgent, "ci runner"))
	wantErr(t, r, "")
	rec := r.GetAclToken()
	if rec.GetAccessorId() != "acc_1" || rec.GetRole() != RoleAgent || rec.GetDescription() != "ci runner" || rec.GetCreatedUnixNano() != h.clock {
		t.Fatalf("created record %v (clock %d)", rec, h.clock)
	}
	wantErr(t, h.apply1(createACL("acc_2", "other", RoleRead, "")), "")

	got := lookupACL(t, h.f, "s3cret")
	if got.GetAccessorId() != "acc_1" || got.GetRole() != RoleAgent {
		t.Fatalf("lookup: %v", got)
	}
	if lookupACL(t, h.f, "s3cre") != nil {
		t.Fatal("a different secret was found")
	}
	list, err := h.f.ListAclTokens()
	if err != nil || len(list) != 2 || list[0].AccessorId != "acc_1" || list[1].AccessorId != "acc_2" {
		t.Fatalf("ListAclTokens: %v, %v", list, err)
	}

	r = h.apply1(revokeACL("acc_1"))
	wantErr(t, r, "")
	if r.GetAclToken().GetAccessorId() != "acc_1" {
		t.Fatalf("revoke result %v", r)
	}
	if rec := lookupACL(t, h.f, "s3cret"); rec != nil {
		t.Fatalf("revoked token still found: %v", rec)
	}
	if lookupACL(t, h.f, "other") == nil {
		t.Fatal("revoking acc_1 removed acc_2")
	}
	wantErr(t, h.apply1(revokeACL("acc_1")), ReasonNotFound)
	if list, _ := h.f.ListAclTokens(); len(list) != 1 || list[0].AccessorId != "acc_2" {
		t.Fatalf("list after revoke: %v", list)
	}
	// The secret of a revoked token may be stored again under a new accessor.
	wantErr(t, h.apply1(createACL("acc_3", "s3cret", RoleOperator, "")), "")
	if rec := lookupACL(t, h.f, "s3cret"); rec.GetAccessorId() != "acc_3" || rec.GetRole() != RoleOperator {
		t.Fatalf("re-created: %v", rec)
	}
}

// TestAclTokenRefusals: bad commands change nothing and say why.
func TestAclTokenRefusals(t *testing.T) {
	h := newHarness(t)
	wantErr(t, h.apply1(createACL("acc_1", "s", RoleRead, "")), "")
	before := h.state()
	shortHash := createACL("acc_x", "s2", RoleRead, "")
	shortHash.GetCreateAclToken().SecretSha256 = []byte{1, 2, 3}
	tests := []struct {
		name   string
		cmd    *fsmpb.Command
		reason Reason
	}{
		{"duplicate accessor", createACL("acc_1", "another", RoleRead, ""), ReasonAlreadyExists},
		{"duplicate secret", createACL("acc_2", "s", RoleRead, ""), ReasonAlreadyExists},
		{"unknown role", createACL("acc_3", "s3", "admin", ""), ReasonInvalidArgument},
		{"empty role", createACL("acc_3", "s3", "", ""), ReasonInvalidArgument},
		{"empty accessor", createACL("", "s3", RoleRead, ""), ReasonInvalidArgument},
		{"long accessor", createACL(strings.Repeat("a", MaxAccessorIDBytes+1), "s3", RoleRead, ""), ReasonInvalidArgument},
		{"long description", createACL("acc_3", "s3", RoleRead, strings.Repeat("d", MaxAclDescriptionBytes+1)), ReasonInvalidArgument},
		{"hash not sha256", shortHash, ReasonInvalidArgument},
		{"revoke unknown", revokeACL("acc_nope"), ReasonNotFound},
		{"revoke empty", revokeACL(""), ReasonInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, h.apply1(tt.cmd), tt.reason)
			if after := h.state(); after != before {
				t.Fatalf("a refused command changed the state:\n%s", firstDiff(after, before))
			}
		})
	}
}

// TestAclTokenIdempotent: a retried create or revoke (same request id)
// returns the original result and changes nothing more.
func TestAclTokenIdempotent(t *testing.T) {
	h := newHarness(t)
	first := h.apply1(req("req-c", createACL("acc_1", "s", RoleOperator, "")))
	wantErr(t, first, "")
	// A retry drawn with a different accessor still answers the first.
	again := h.apply1(req("req-c", createACL("acc_9", "t", RoleOperator, "")))
	if again.GetAclToken().GetAccessorId() != "acc_1" || !bytes.Equal(again.GetAclToken().GetSecretSha256(), first.GetAclToken().GetSecretSha256()) {
		t.Fatalf("retried create: %v, want the first result %v", again, first)
	}
	if list, _ := h.f.ListAclTokens(); len(list) != 1 {
		t.Fatalf("retry stored another token: %v", list)
	}
	wantErr(t, h.apply1(req("req-r", revokeACL("acc_1"))), "")
	wantErr(t, h.apply1(req("req-r", revokeACL("acc_1"))), "") // the stored success
	wantErr(t, h.apply1(req("req-r2", revokeACL("acc_1"))), ReasonNotFound)
}

// TestAclTokensSurviveSnapshot: the acl buckets travel in a snapshot, so a
// replica restored from one accepts the same tokens and lists the same.
func TestAclTokensSurviveSnapshot(t *testing.T) {
	src := newHarness(t)
	wantErr(t, src.apply1(createACL("acc_1", "kept", RoleAgent, "kept")), "")
	wantErr(t, src.apply1(createACL("acc_2", "revoked", RoleRead, "")), "")
	wantErr(t, src.apply1(revokeACL("acc_2")), "")

	dst := newHarness(t)
	wantErr(t, dst.apply1(createACL("acc_local", "local", RoleOperator, "")), "")
	if err := restoreBytes(dst.f, snapshotBytes(t, src.f)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if rec := lookupACL(t, dst.f, "kept"); rec.GetAccessorId() != "acc_1" || rec.GetRole() != RoleAgent {
		t.Fatalf("restored lookup: %v", rec)
	}
	for _, gone := range []string{"revoked", "local"} {
		if rec := lookupACL(t, dst.f, gone); rec != nil {
			t.Fatalf("%s token found after restore: %v", gone, rec)
		}
	}
	if got, want := dump(t, dst.f, true), dump(t, src.f, true); got != want {
		t.Fatalf("restored database differs:\n%s", firstDiff(got, want))
	}
}
