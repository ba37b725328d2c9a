package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

func clusterMembersCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.clusterClient().Members(ctx, connect.NewRequest(&fakv1.MembersRequest{}))
		if err != nil {
			return err
		}
		members := resp.Msg.GetMembers()
		slices.SortFunc(members, func(a, b *fakv1.Member) int { return cmp.Compare(a.GetName(), b.GetName()) })
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		rows := make([][]string, 0, len(members))
		for _, m := range members {
			rows = append(rows, []string{
				m.GetName(), m.GetStatus(), formatBool(m.GetVoter()),
				m.GetApiAddr(), m.GetRaftAddr(), m.GetGossipAddr(),
			})
		}
		return writeTable(c.stdout, []string{"NAME", "STATUS", "VOTER", "API", "RAFT", "GOSSIP"}, rows)
	}
}

func clusterPeersCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.clusterClient().RaftPeers(ctx, connect.NewRequest(&fakv1.RaftPeersRequest{}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		rows := make([][]string, 0, len(resp.Msg.GetPeers()))
		for _, p := range resp.Msg.GetPeers() {
			rows = append(rows, []string{p.GetId(), p.GetAddress(), formatBool(p.GetVoter()), formatBool(p.GetLeader())})
		}
		return writeTable(c.stdout, []string{"ID", "ADDRESS", "VOTER", "LEADER"}, rows)
	}
}

func clusterStatusCommand(fs *flag.FlagSet) runFunc {
	all := fs.Bool("all", true, "show every alive member; false shows only the node at --addr")
	return func(ctx context.Context, c *cli, _ []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.clusterClient().Status(ctx, connect.NewRequest(&fakv1.StatusRequest{All: *all}))
		if err != nil {
			return err
		}
		nodes := resp.Msg.GetNodes()
		slices.SortFunc(nodes, func(a, b *fakv1.NodeStatus) int { return cmp.Compare(a.GetName(), b.GetName()) })
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		header, rows := statusTable(nodes)
		return writeTable(c.stdout, header, rows)
	}
}

// statusTable lays out node statuses. The ERROR column appears only when
// some node could not be reached, and that node's other columns are blank.
func statusTable(nodes []*fakv1.NodeStatus) (header []string, rows [][]string) {
	header = []string{"NAME", "STATE", "TERM", "LAST_INDEX", "COMMIT", "APPLIED", "LEADER"}
	withErrors := slices.ContainsFunc(nodes, func(n *fakv1.NodeStatus) bool { return n.GetError() != "" })
	if withErrors {
		header = append(header, "ERROR")
	}
	for _, n := range nodes {
		name := cmp.Or(n.GetName(), n.GetApiAddr())
		row := []string{name, "", "", "", "", "", ""}
		if n.GetError() == "" {
			row = []string{
				name, n.GetRaftState(), formatUint(n.GetTerm()), formatUint(n.GetLastLogIndex()),
				formatUint(n.GetCommitIndex()), formatUint(n.GetAppliedIndex()), n.GetLeaderId(),
			}
		}
		if withErrors {
			row = append(row, n.GetError())
		}
		rows = append(rows, row)
	}
	return header, rows
}

// leaveWait bounds cluster leave: the node bounds its own leave to 10 s
// (waiting for the leader to take it out of the Raft configuration), so the
// call must wait past that, not give up at the same moment (a loaded fleet
// saw the client's 10 s deadline expire while the leave went through).
const leaveWait = 30 * time.Second

func clusterLeaveCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, _ []string) error {
		ctx, cancel := context.WithTimeout(ctx, leaveWait)
		defer cancel()
		resp, err := c.clusterClient().Leave(ctx, connect.NewRequest(&fakv1.LeaveRequest{}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		_, err = fmt.Fprintf(c.stdout, "Node at %s is leaving the cluster\n", c.baseURL)
		return err
	}
}
