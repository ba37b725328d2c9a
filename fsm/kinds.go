package fsm

// Event kinds of the journal (DESIGN.md §4). Kinds are typed: an append with
// a kind outside this vocabulary is refused with INVALID_ARGUMENT.
const (
	KindSessionCreated = "session.created"
	KindSessionStopped = "session.stopped"
)

// systemKinds are written only by the FSM itself.
var systemKinds = map[string]bool{
	KindSessionCreated: true,
	KindSessionStopped: true,
}

// clientKinds may be appended through AppendEvents.
var clientKinds = map[string]bool{
	"input":                            true,
	"turn.started":                     true,
	"output":                           true,
	"turn.completed":                   true,
	"tool.call":                        true,
	"tool.result":                      true,
	"approval.requested":               true,
	"approval.answered":                true,
	"checkpoint":                       true,
	"compaction":                       true,
	"note":                             true,
	"fak.session.provider_boundary.v1": true,
}

// AppendableKind reports whether clients may append events of this kind.
func AppendableKind(kind string) bool { return clientKinds[kind] }

// KnownKind reports whether kind is in the journal vocabulary at all.
func KnownKind(kind string) bool { return clientKinds[kind] || systemKinds[kind] }
