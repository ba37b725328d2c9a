package apiclient

import fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"

// Role names live with the clients, not in api, so fakctl spells a role
// as the nodes do without linking the server.

// RoleName is the name of a role as the tokens file and messages spell it
// (read, agent, operator).
func RoleName(r fakv1.Role) string {
	switch r {
	case fakv1.Role_ROLE_READ:
		return "read"
	case fakv1.Role_ROLE_AGENT:
		return "agent"
	case fakv1.Role_ROLE_OPERATOR:
		return "operator"
	}
	return "unknown"
}

// ParseRole reads a role name (read, agent, operator).
func ParseRole(name string) (fakv1.Role, bool) {
	for _, r := range []fakv1.Role{fakv1.Role_ROLE_READ, fakv1.Role_ROLE_AGENT, fakv1.Role_ROLE_OPERATOR} {
		if RoleName(r) == name {
			return r, true
		}
	}
	return fakv1.Role_ROLE_UNSPECIFIED, false
}
