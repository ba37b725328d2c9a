package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// AclService: API tokens kept (hashed) in the replicated state. The node
// that receives CreateToken draws the accessor id and the secret, and
// carries both to the leader when it forwards, so every attempt of one
// request proposes the same token and a retry after an indeterminate
// outcome still returns the secret that was stored.

const (
	accessorPrefix = "acc_"
	secretPrefix   = "fak_"
	// headerAclAccessor and headerAclSecret carry the drawn token on a
	// forwarded CreateToken (the request has no fields for them). Honoured
	// only on a forwarded call, which already carries an operator's token.
	headerAclAccessor = "Fak-Acl-Accessor"
	headerAclSecret   = "Fak-Acl-Secret"
)

type aclHandler struct {
	fakv1connect.UnimplementedAclServiceHandler
	s *Server
}

// newSecret draws a token secret: fak_ + 32 random bytes in hex.
func newSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return secretPrefix + hex.EncodeToString(b[:])
}

// drawnToken returns the accessor id and secret a forwarded request
// carries, or new ones.
func drawnToken(hdr http.Header) (accessor, secret string) {
	if hdr.Get(headerForwarded) != "" {
		a, s := hdr.Get(headerAclAccessor), hdr.Get(headerAclSecret)
		if strings.HasPrefix(a, accessorPrefix) && len(a) <= fsm.MaxAccessorIDBytes &&
			strings.HasPrefix(s, secretPrefix) && len(s) == len(secretPrefix)+64 {
			return a, s
		}
	}
	return NewID(accessorPrefix), newSecret()
}

func aclTokenToAPI(t *fsmpb.AclToken) *fakv1.AclToken {
	role, _ := apiclient.ParseRole(t.GetRole())
	return &fakv1.AclToken{
		AccessorId: t.GetAccessorId(), Role: role,
		Description: t.GetDescription(), CreatedUnixNano: t.GetCreatedUnixNano(),
	}
}

func (h *aclHandler) CreateToken(ctx context.Context, req *connect.Request[fakv1.CreateTokenRequest]) (*connect.Response[fakv1.CreateTokenResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.Role == fakv1.Role_ROLE_UNSPECIFIED || apiclient.RoleName(m.Role) == "unknown" {
		return nil, invalidArgument("role must be read, agent or operator")
	}
	if len(m.Description) > fsm.MaxAclDescriptionBytes {
		return nil, invalidArgument("description longer than %d bytes", fsm.MaxAclDescriptionBytes)
	}
	accessor, secret := drawnToken(req.Header())
	digest := sha256.Sum256([]byte(secret))
	resp, err := write(ctx, h.s, req, "",
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_CreateAclToken{CreateAclToken: &fsmpb.CreateAclToken{
				AccessorId: accessor, SecretSha256: digest[:], Role: apiclient.RoleName(m.Role), Description: m.Description,
			}}}
		},
		func(res *fsmpb.Result) *fakv1.CreateTokenResponse {
			out := &fakv1.CreateTokenResponse{Token: aclTokenToAPI(res.GetAclToken())}
			// A request id seen before answers with the token stored then,
			// whose secret this attempt does not know.
			if subtle.ConstantTimeCompare(res.GetAclToken().GetSecretSha256(), digest[:]) == 1 {
				out.Secret = secret
			}
			return out
		},
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.CreateTokenRequest]) (*connect.Response[fakv1.CreateTokenResponse], error) {
			r.Header().Set(headerAclAccessor, accessor)
			r.Header().Set(headerAclSecret, secret)
			return p.acl.CreateToken(ctx, r)
		})
	if err != nil {
		return nil, err
	}
	if resp.Msg.Secret == "" {
		return nil, newError(connect.CodeAlreadyExists, &fakv1.ErrorInfo{Reason: string(fsm.ReasonAlreadyExists)},
			"request "+m.RequestId+" already created token "+resp.Msg.GetToken().GetAccessorId()+"; its secret was shown once")
	}
	return resp, nil
}

// ListTokens lists the stored tokens (never a secret or its hash), after a
// read barrier so a token just created anywhere is listed.
func (h *aclHandler) ListTokens(ctx context.Context, req *connect.Request[fakv1.ListTokensRequest]) (*connect.Response[fakv1.ListTokensResponse], error) {
	if err := h.s.readBarrier(ctx, req.Header(), fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE); err != nil {
		return nil, toConnectError(err)
	}
	recs, err := h.s.fsm.ListAclTokens()
	if err != nil {
		return nil, toConnectError(err)
	}
	out := &fakv1.ListTokensResponse{}
	for _, r := range recs {
		out.Tokens = append(out.Tokens, aclTokenToAPI(r))
	}
	return connect.NewResponse(out), nil
}

func (h *aclHandler) RevokeToken(ctx context.Context, req *connect.Request[fakv1.RevokeTokenRequest]) (*connect.Response[fakv1.RevokeTokenResponse], error) {
	m := req.Msg
	if err := h.s.stampRequestID(&m.RequestId); err != nil {
		return nil, err
	}
	if m.AccessorId == "" || len(m.AccessorId) > fsm.MaxAccessorIDBytes {
		return nil, invalidArgument("accessor_id must be 1-%d bytes", fsm.MaxAccessorIDBytes)
	}
	return write(ctx, h.s, req, "",
		func() *fsmpb.Command {
			return &fsmpb.Command{RequestId: m.RequestId, Body: &fsmpb.Command_RevokeAclToken{RevokeAclToken: &fsmpb.RevokeAclToken{
				AccessorId: m.AccessorId,
			}}}
		},
		func(*fsmpb.Result) *fakv1.RevokeTokenResponse { return &fakv1.RevokeTokenResponse{} },
		func(ctx context.Context, p *peerClients, r *connect.Request[fakv1.RevokeTokenRequest]) (*connect.Response[fakv1.RevokeTokenResponse], error) {
			return p.acl.RevokeToken(ctx, r)
		})
}
