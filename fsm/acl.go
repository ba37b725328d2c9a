package fsm

import (
	"crypto/sha256"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// API tokens (ACL) live in the replicated state so that a revoke reaches
// every node: each replica refuses a revoked token from the moment it
// applies the revoke. Only the SHA-256 of a secret is stored; the node that
// draws a secret shows it once.

// Roles a stored token may carry, lowest first; the names are the ones the
// tokens file uses.
const (
	RoleRead     = "read"
	RoleAgent    = "agent"
	RoleOperator = "operator"
)

// Limits on a token record.
const (
	MaxAccessorIDBytes     = 128
	MaxAclDescriptionBytes = 256
)

// ValidRole reports whether role is one a token may carry.
func ValidRole(role string) bool {
	switch role {
	case RoleRead, RoleAgent, RoleOperator:
		return true
	}
	return false
}

func (a *applier) createAclToken(c *fsmpb.Command, cmd *fsmpb.CreateAclToken) (*fsmpb.Result, *Error) {
	switch {
	case cmd.AccessorId == "" || len(cmd.AccessorId) > MaxAccessorIDBytes:
		return nil, errorf(ReasonInvalidArgument, "accessor id must be 1-%d bytes", MaxAccessorIDBytes)
	case len(cmd.SecretSha256) != sha256.Size:
		return nil, errorf(ReasonInvalidArgument, "secret hash must be %d bytes (SHA-256)", sha256.Size)
	case !ValidRole(cmd.Role):
		return nil, errorf(ReasonInvalidArgument, "role %q is not one of read, agent, operator", cmd.Role)
	case len(cmd.Description) > MaxAclDescriptionBytes:
		return nil, errorf(ReasonInvalidArgument, "description longer than %d bytes", MaxAclDescriptionBytes)
	}
	acl, byHash := a.tx.Bucket(bucketACL), a.tx.Bucket(bucketACLHash)
	if acl.Get([]byte(cmd.AccessorId)) != nil {
		return nil, errorf(ReasonAlreadyExists, "token %s already exists", cmd.AccessorId)
	}
	if byHash.Get(cmd.SecretSha256) != nil {
		// Never says which token holds the secret.
		return nil, errorf(ReasonAlreadyExists, "a token with this secret already exists")
	}
	rec := &fsmpb.AclToken{
		AccessorId: cmd.AccessorId, SecretSha256: cmd.SecretSha256, Role: cmd.Role,
		Description: cmd.Description, CreatedUnixNano: c.TimeUnixNano,
	}
	buf, err := proto.Marshal(rec)
	if err != nil {
		panic("fsm: marshal acl token: " + err.Error())
	}
	a.must(acl.Put([]byte(rec.AccessorId), buf))
	a.must(byHash.Put(rec.SecretSha256, []byte(rec.AccessorId)))
	return &fsmpb.Result{Body: &fsmpb.Result_AclToken{AclToken: rec}}, nil
}

// revokeAclToken deletes the record and its hash index entry; the result
// carries the deleted record.
func (a *applier) revokeAclToken(_ *fsmpb.Command, cmd *fsmpb.RevokeAclToken) (*fsmpb.Result, *Error) {
	if cmd.AccessorId == "" || len(cmd.AccessorId) > MaxAccessorIDBytes {
		return nil, errorf(ReasonInvalidArgument, "accessor id must be 1-%d bytes", MaxAccessorIDBytes)
	}
	acl := a.tx.Bucket(bucketACL)
	raw := acl.Get([]byte(cmd.AccessorId))
	if raw == nil {
		return nil, errorf(ReasonNotFound, "token %s not found", cmd.AccessorId)
	}
	rec := &fsmpb.AclToken{}
	if err := proto.Unmarshal(raw, rec); err != nil {
		panic("fsm: corrupt acl token " + cmd.AccessorId + ": " + err.Error())
	}
	a.must(a.tx.Bucket(bucketACLHash).Delete(rec.SecretSha256))
	a.must(acl.Delete([]byte(cmd.AccessorId)))
	return &fsmpb.Result{Body: &fsmpb.Result_AclToken{AclToken: rec}}, nil
}
