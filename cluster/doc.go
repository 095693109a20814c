// Package cluster makes yuebing nodes one KV-cache pool: membership and
// leader election on etcd, the stream of each node's block states to the
// leader, reads of blocks held on other nodes, read-your-writes across them,
// and, on the leader, the global block index and the replication driver.
//
// A Node joins the cluster named in its Options: it takes a dense node id
// (stable by node name, assigned in an etcd transaction), registers under a
// lease it keeps alive, and campaigns for leadership. Block locations never go
// to etcd: every node reports to the current leader what its store holds
// (a full state first, then the state of the blocks that changed), so a new
// leader rebuilds the index from the nodes within a report or two. A put is
// registered with the leader before it is acknowledged (Publish) and a
// delete reaches every node (Deleted), so every node reads what any node
// acknowledged. The node is its store's tier.RemoteReader, so every front
// end reading through the store serves blocks held elsewhere; blocks are
// read from their holder in one streamed request, checksum verified end to
// end, with the holder's location cached and failover to the next holder.
//
//	store, _ := tier.NewHierarchy(tiers, tier.HierarchyOptions{})
//	n, _ := cluster.New(cluster.Options{
//		Cluster: "prod", NodeName: "cache-7", Endpoints: []string{"http://etcd1:2379"},
//		Token: token, TransferListen: "10.0.0.7:7070",
//	}, store)
//	http.Handle("/internal/", n.Handler()) // peers call it with the cluster token
//	_ = n.Start(ctx, cluster.Addrs{HTTP: "10.0.0.7:8080"})
//	defer n.Close()
//	_ = n.Publish(ctx, key)                // after a put, before its answer
//	hd, origin, _ := store.Fetch(ctx, key) // local, or from another node
//	ms, _ := n.Query(ctx, chain)           // per node, the longest prefix held
//
// StartEmbedded runs a single-member etcd inside a process for a dev cluster.
// docs/cluster.md describes the design: the report format, the read path,
// replication, the internal API and the failure modes.
package cluster
