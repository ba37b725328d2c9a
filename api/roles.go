package api

import (
	"connectrpc.com/grpcreflect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// Roles, lowest first: a token of a role may call every procedure that needs
// that role or a lower one.
const (
	RoleRead     = fakv1.Role_ROLE_READ
	RoleAgent    = fakv1.Role_ROLE_AGENT
	RoleOperator = fakv1.Role_ROLE_OPERATOR
)

// procedureRoles is the least role each procedure needs. A procedure
// missing here is refused to every token (fail closed); roles_test fails
// when a generated procedure has no entry.
var procedureRoles = map[string]fakv1.Role{
	// Reading and observing sessions. WatchEvents with an attachment id only
	// checks that the attachment exists; a read token observes without one.
	fakv1connect.SessionServiceListSessionsProcedure:    RoleRead,
	fakv1connect.SessionServiceDescribeSessionProcedure: RoleRead,
	fakv1connect.SessionServiceReadEventsProcedure:      RoleRead,
	fakv1connect.SessionServiceWatchEventsProcedure:     RoleRead,
	fakv1connect.SessionServiceDiscoverSessionProcedure: RoleRead,
	fakv1connect.SessionServiceGetLineageProcedure:      RoleRead,
	fakv1connect.SessionServiceGetMoveProcedure:         RoleRead,

	// What an agent (a harness, a terminal, a guard) does to its sessions.
	fakv1connect.SessionServiceCreateSessionProcedure:  RoleAgent,
	fakv1connect.SessionServiceAppendEventsProcedure:   RoleAgent,
	fakv1connect.SessionServiceStopSessionProcedure:    RoleAgent,
	fakv1connect.SessionServicePurgeSessionProcedure:   RoleOperator,
	fakv1connect.SessionServiceAttachProcedure:         RoleAgent,
	fakv1connect.SessionServiceKeepAliveProcedure:      RoleAgent,
	fakv1connect.SessionServiceDetachProcedure:         RoleAgent,
	fakv1connect.SessionServiceActProcedure:            RoleAgent,
	fakv1connect.SessionServiceTakeLeaseProcedure:      RoleAgent,
	fakv1connect.SessionServiceRenewLeaseProcedure:     RoleAgent,
	fakv1connect.SessionServiceReleaseLeaseProcedure:   RoleAgent,
	fakv1connect.SessionServiceAnswerApprovalProcedure: RoleAgent,
	fakv1connect.SessionServiceFreshSessionProcedure:   RoleAgent,
	fakv1connect.SessionServiceResetSessionProcedure:   RoleAgent,
	fakv1connect.SessionServiceClearSessionProcedure:   RoleAgent,
	fakv1connect.SessionServiceNewSessionProcedure:     RoleAgent,
	fakv1connect.SessionServiceForkSessionProcedure:    RoleAgent,
	fakv1connect.SessionServiceMoveSessionProcedure:    RoleOperator,

	// Guarded launches report hooks and charge usage.
	fakv1connect.LifecycleServiceBindLaunchProcedure:           RoleAgent,
	fakv1connect.LifecycleServiceProviderSessionStartProcedure: RoleAgent,
	fakv1connect.LifecycleServiceProviderSessionEndProcedure:   RoleAgent,
	fakv1connect.LifecycleServiceRecordUsageProcedure:          RoleAgent,
	fakv1connect.LifecycleServiceDescribeLaunchProcedure:       RoleRead,

	// The fleet. ReadIndex is read: every node forwards the caller's token
	// with it to make a read linearizable.
	fakv1connect.ClusterServiceMembersProcedure:   RoleRead,
	fakv1connect.ClusterServiceRaftPeersProcedure: RoleRead,
	fakv1connect.ClusterServiceStatusProcedure:    RoleRead,
	fakv1connect.ClusterServiceOverviewProcedure:  RoleRead,
	fakv1connect.ClusterServiceAuditLogProcedure:  RoleRead,
	fakv1connect.ClusterServiceReadIndexProcedure: RoleRead,
	fakv1connect.ClusterServiceLeaveProcedure:     RoleOperator,
	fakv1connect.NodeServiceListNodesProcedure:    RoleRead,
	fakv1connect.NodeServiceDrainNodeProcedure:    RoleOperator,
	fakv1connect.NodeServiceDrainStatusProcedure:  RoleRead,

	// Node-internal: each node's runner writes with an operator token.
	fakv1connect.RunnerServiceAppendRunnerEventsProcedure: RoleOperator,
	fakv1connect.RunnerServiceCommitCheckpointProcedure:   RoleOperator,
	fakv1connect.RunnerServiceCommitRestoreProcedure:      RoleOperator,
	fakv1connect.RunnerServiceFailMoveProcedure:           RoleOperator,
	// Node to node: a workspace holds an agent's files.
	fakv1connect.RunnerServiceGetWorkspaceManifestProcedure: RoleOperator,
	fakv1connect.RunnerServiceFetchWorkspaceChunksProcedure: RoleOperator,
	fakv1connect.RunnerServiceCopyWorkspaceProcedure:        RoleOperator,
	fakv1connect.RunnerServiceRecordWorkspaceCopyProcedure:  RoleOperator,

	fakv1connect.OperatorServiceSnapshotSaveProcedure:       RoleOperator,
	fakv1connect.OperatorServiceSnapshotRestoreProcedure:    RoleOperator,
	fakv1connect.OperatorServiceRaftRemovePeerProcedure:     RoleOperator,
	fakv1connect.OperatorServiceRaftTransferLeaderProcedure: RoleOperator,
	fakv1connect.OperatorServiceVerifyReplayProcedure:       RoleOperator,

	fakv1connect.AclServiceCreateTokenProcedure: RoleOperator,
	fakv1connect.AclServiceListTokensProcedure:  RoleOperator,
	fakv1connect.AclServiceRevokeTokenProcedure: RoleOperator,

	// Reflection lists services and their schemas, no data.
	"/" + grpcreflect.ReflectV1ServiceName + "/ServerReflectionInfo":      RoleRead,
	"/" + grpcreflect.ReflectV1AlphaServiceName + "/ServerReflectionInfo": RoleRead,
}

// requiredRole is the least role procedure needs; ok is false for a
// procedure the table does not know, which nobody may call.
func requiredRole(procedure string) (role fakv1.Role, ok bool) {
	role, ok = procedureRoles[procedure]
	return role, ok
}
