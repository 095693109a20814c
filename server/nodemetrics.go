package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/scheduler"
)

// nodeCollector exports the counters of the node's parts beyond the HTTP
// API and the store: the cluster, the transfer service, the Redis front
// end and the embedded conductor. Like storeCollector it reads them at
// scrape time, so nothing polls; a part that is off exports nothing.
type nodeCollector struct{ n *Node }

var (
	descClusterMembers  = prometheus.NewDesc("yuebing_cluster_members", "Members of the cluster this node sees.", nil, nil)
	descClusterLeader   = prometheus.NewDesc("yuebing_cluster_is_leader", "1 when this node leads the cluster.", nil, nil)
	descClusterHasLead  = prometheus.NewDesc("yuebing_cluster_has_leader", "1 when the cluster has a leader (0 during an election).", nil, nil)
	descClusterTerm     = prometheus.NewDesc("yuebing_cluster_leader_term", "The etcd revision at which the current leader was elected.", nil, nil)
	descClusterFetches  = prometheus.NewDesc("yuebing_cluster_fetches_total", "Blocks read from other nodes.", nil, nil)
	descClusterFetchErr = prometheus.NewDesc("yuebing_cluster_fetch_failures_total", "Reads from other nodes that failed.", nil, nil)
	descClusterFetched  = prometheus.NewDesc("yuebing_cluster_fetched_bytes_total", "Bytes of blocks read from other nodes.", nil, nil)
	descClusterAdmitted = prometheus.NewDesc("yuebing_cluster_admitted_total", "Blocks read from other nodes and kept here.", nil, nil)
	descClusterRelayed  = prometheus.NewDesc("yuebing_cluster_relayed_total", "Blocks read from other nodes and relayed to clients without a copy here.", nil, nil)
	descClusterServed   = prometheus.NewDesc("yuebing_cluster_served_total", "Blocks sent to readers on other nodes.", nil, nil)
	descClusterPublish  = prometheus.NewDesc("yuebing_cluster_published_total", "Blocks registered with the leader before a put was acknowledged.", nil, nil)
	descClusterPubFail  = prometheus.NewDesc("yuebing_cluster_publish_failures_total", "Put registrations the leader did not take (the put stood).", nil, nil)
	descClusterPeerAsk  = prometheus.NewDesc("yuebing_cluster_peer_asks_total", "Reads that asked the other nodes directly (no leader, or its index incomplete).", nil, nil)
	descClusterReports  = prometheus.NewDesc("yuebing_cluster_reports_total", "Store changes reported to the leader.", nil, nil)
	descClusterResyncs  = prometheus.NewDesc("yuebing_cluster_resyncs_total", "Full-state reports sent to the leader.", nil, nil)

	descXferSlices    = prometheus.NewDesc("yuebing_transfer_slices_total", "Transfer slices completed.", nil, nil)
	descXferRetries   = prometheus.NewDesc("yuebing_transfer_retries_total", "Transfer slices resubmitted after their path failed.", nil, nil)
	descXferPathsDown = prometheus.NewDesc("yuebing_transfer_paths_down_total", "Times a transfer path was marked down.", nil, nil)
	descXferDials     = prometheus.NewDesc("yuebing_transfer_dials_total", "Transfer connections dialled.", nil, nil)
	descXferSent      = prometheus.NewDesc("yuebing_transfer_blocks_sent_total", "Blocks sent to peers that asked for them by key.", nil, nil)
	descXferRead      = prometheus.NewDesc("yuebing_transfer_blocks_read_total", "Blocks read from peers by key.", nil, nil)

	descRESPClients  = prometheus.NewDesc("yuebing_resp_connected_clients", "Redis-protocol clients connected.", nil, nil)
	descRESPConns    = prometheus.NewDesc("yuebing_resp_connections_total", "Redis-protocol connections accepted.", nil, nil)
	descRESPRejected = prometheus.NewDesc("yuebing_resp_rejected_connections_total", "Redis-protocol connections refused at the connection limit.", nil, nil)
	descRESPCommands = prometheus.NewDesc("yuebing_resp_commands_total", "Redis-protocol commands processed.", nil, nil)
	descRESPErrors   = prometheus.NewDesc("yuebing_resp_error_replies_total", "Redis-protocol error replies.", nil, nil)
	descRESPHits     = prometheus.NewDesc("yuebing_resp_keyspace_hits_total", "Redis-protocol key reads that found the key.", nil, nil)
	descRESPMisses   = prometheus.NewDesc("yuebing_resp_keyspace_misses_total", "Redis-protocol key reads that did not.", nil, nil)
	descRESPNetIn    = prometheus.NewDesc("yuebing_resp_net_input_bytes_total", "Bytes read from Redis-protocol clients.", nil, nil)
	descRESPNetOut   = prometheus.NewDesc("yuebing_resp_net_output_bytes_total", "Bytes written to Redis-protocol clients.", nil, nil)

	descShmSessions      = prometheus.NewDesc("yuebing_shm_sessions", "Open shared-memory staging sessions.", nil, nil)
	descShmBytes         = prometheus.NewDesc("yuebing_shm_bytes", "Bytes of the open staging sessions' segments.", nil, nil)
	descShmAccepted      = prometheus.NewDesc("yuebing_shm_connections_total", "Connections accepted on the staging socket.", nil, nil)
	descShmPendingClosed = prometheus.NewDesc("yuebing_shm_pending_closed_total", "Staging connections closed before their request to make room for newer ones (shm.max_pending).", nil, nil)
	descShmHelloTimeouts = prometheus.NewDesc("yuebing_shm_hello_timeouts_total", "Staging connections that sent no request within shm.hello_timeout.", nil, nil)
	descShmAcceptErrors  = prometheus.NewDesc("yuebing_shm_accept_errors_total", "Failed accepts on the staging socket (out of descriptors and the like), each retried.", nil, nil)
	descShmQuotaRefusals = prometheus.NewDesc("yuebing_shm_quota_refusals_total", "Staging sessions refused for a tenant's quota.", nil, nil)

	descCondDecisions = prometheus.NewDesc("yuebing_conductor_decisions_total", "Scheduling decisions by result: accepted, or the reason for a rejection.", []string{"result"}, nil)
	descCondInstances = prometheus.NewDesc("yuebing_conductor_instances", "Registered instances by role.", []string{"role"}, nil)
	descCondMigr      = prometheus.NewDesc("yuebing_conductor_migrations_total", "Pull plans by outcome: queued, dropped (queue full), failed.", []string{"outcome"}, nil)
)

func (nc nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClusterMembers, descClusterLeader, descClusterHasLead, descClusterTerm,
		descClusterFetches, descClusterFetchErr, descClusterFetched, descClusterAdmitted, descClusterRelayed, descClusterServed, descClusterPublish, descClusterPubFail, descClusterPeerAsk,
		descClusterReports, descClusterResyncs, descXferSlices, descXferRetries, descXferPathsDown, descXferDials, descXferSent, descXferRead,
		descRESPClients, descRESPConns, descRESPRejected, descRESPCommands, descRESPErrors, descRESPHits, descRESPMisses,
		descRESPNetIn, descRESPNetOut, descCondDecisions, descCondInstances, descCondMigr,
		descShmSessions, descShmBytes, descShmAccepted, descShmPendingClosed, descShmHelloTimeouts, descShmAcceptErrors, descShmQuotaRefusals} {
		ch <- d
	}
}

func (nc nodeCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	n := nc.n
	if cn := n.clusterNode(); cn != nil {
		li, ok := cn.Leader()
		gauge(descClusterMembers, int64(len(cn.Members())))
		gauge(descClusterHasLead, b2i(ok))
		gauge(descClusterLeader, b2i(ok && li.ID == cn.ID()))
		if ok {
			gauge(descClusterTerm, li.Term)
		}
		c := cn.Counters()
		counter(descClusterFetches, c.Fetches)
		counter(descClusterFetchErr, c.FetchFailures)
		counter(descClusterFetched, c.FetchedBytes)
		counter(descClusterAdmitted, c.Admitted)
		counter(descClusterRelayed, c.Relayed)
		counter(descClusterServed, c.Served)
		counter(descClusterPublish, c.Published)
		counter(descClusterPubFail, c.PublishFailures)
		counter(descClusterPeerAsk, c.PeerAsks)
		counter(descClusterReports, c.Reports)
		counter(descClusterResyncs, c.Resyncs)
		if t, ok := cn.TransferStats(); ok {
			counter(descXferSlices, t.Slices)
			counter(descXferRetries, t.Retries)
			counter(descXferPathsDown, t.PathsDown)
			counter(descXferDials, t.Dials)
			counter(descXferSent, t.BlocksSent)
			counter(descXferRead, t.BlocksRead)
		}
	}
	if r := n.resp.Load(); r != nil {
		s := r.Stats()
		gauge(descRESPClients, s.ConnectedClients)
		counter(descRESPConns, s.TotalConnections)
		counter(descRESPRejected, s.RejectedConns)
		counter(descRESPCommands, s.Commands)
		counter(descRESPErrors, s.ErrorReplies)
		counter(descRESPHits, s.KeyspaceHits)
		counter(descRESPMisses, s.KeyspaceMisses)
		counter(descRESPNetIn, s.NetInputBytes)
		counter(descRESPNetOut, s.NetOutputBytes)
	}
	if st := n.staging; st != nil {
		sessions, bytes := st.Stats()
		gauge(descShmSessions, int64(sessions))
		gauge(descShmBytes, bytes)
		c := st.Counters()
		counter(descShmAccepted, c.Accepted)
		counter(descShmPendingClosed, c.PendingClosed)
		counter(descShmHelloTimeouts, c.HelloTimeouts)
		counter(descShmAcceptErrors, c.AcceptErrors)
		counter(descShmQuotaRefusals, c.QuotaRefusals)
	}
	if d := n.conductor; d != nil {
		st := d.Stats()
		counter(descCondDecisions, st.Decisions.Accepted, "accepted")
		for r, v := range st.Decisions.Rejected {
			counter(descCondDecisions, v, string(r))
		}
		for _, r := range []scheduler.Role{scheduler.RolePrefill, scheduler.RoleDecode, scheduler.RoleStore} {
			gauge(descCondInstances, int64(st.Instances[r]), r.String())
		}
		counter(descCondMigr, st.Migrations.Queued, "queued")
		counter(descCondMigr, st.Migrations.Dropped, "dropped")
		counter(descCondMigr, st.Migrations.Failed, "failed")
	}
}
