package rdma

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// AnyLocation is the Topology key used for memory locations that have no
// entry of their own.
const AnyLocation = "*"

// NICs lists the network interfaces that serve a memory location, best first.
// What names a NIC is up to the transport; for TCP it is the "host:port" the
// transport listens on and binds outgoing connections to.
type NICs struct {
	// Preferred NICs carry a location's traffic while they work (for
	// example, the NICs on the same PCIe switch or NUMA node).
	Preferred []string `json:"preferred"`
	// Secondary NICs are used only when every preferred path is down.
	Secondary []string `json:"secondary,omitempty"`
}

// Topology maps memory locations ("cpu:0", "cuda:1") to their NICs, in the
// spirit of Mooncake's topology matrix. The key AnyLocation applies to
// locations without an entry.
//
// In JSON:
//
//	{"cpu:0": {"preferred": ["10.0.0.1:7070"], "secondary": ["10.0.1.1:7070"]}}
type Topology map[string]NICs

// ParseTopology decodes and validates a JSON topology.
func ParseTopology(data []byte) (Topology, error) {
	var t Topology
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("rdma: topology: %w", err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// Validate reports every problem at once: empty names, locations without a
// preferred NIC, a NIC listed twice for one location.
func (t Topology) Validate() error {
	var errs []error
	for _, loc := range t.Locations() {
		n := t[loc]
		if err := validName("location", loc); err != nil {
			errs = append(errs, fmt.Errorf("rdma: topology: %w", err))
		}
		if len(n.Preferred) == 0 {
			errs = append(errs, fmt.Errorf("rdma: topology: location %q has no preferred NIC", loc))
		}
		seen := map[string]bool{}
		for _, nic := range slices.Concat(n.Preferred, n.Secondary) {
			if nic == "" || len(nic) > MaxNameLen {
				errs = append(errs, fmt.Errorf("rdma: topology: location %q: NIC name must be 1 to %d bytes", loc, MaxNameLen))
				continue
			}
			if seen[nic] {
				errs = append(errs, fmt.Errorf("rdma: topology: location %q lists NIC %q twice", loc, nic))
			}
			seen[nic] = true
		}
	}
	return errors.Join(errs...)
}

// Locations returns the location keys in sorted order.
func (t Topology) Locations() []string {
	locs := make([]string, 0, len(t))
	for loc := range t {
		locs = append(locs, loc)
	}
	sort.Strings(locs)
	return locs
}

// For returns the NICs for a location: its own entry, else the AnyLocation
// entry, else every NIC of the topology as preferred (so a location the
// operator forgot still works, without a preference).
func (t Topology) For(location string) NICs {
	if n, ok := t[location]; ok {
		return n
	}
	if n, ok := t[AnyLocation]; ok {
		return n
	}
	return NICs{Preferred: t.All()}
}

// All returns every NIC named in the topology once, in a stable order:
// locations sorted, preferred before secondary.
func (t Topology) All() []string {
	var all []string
	seen := map[string]bool{}
	for _, loc := range t.Locations() {
		for _, nic := range slices.Concat(t[loc].Preferred, t[loc].Secondary) {
			if !seen[nic] {
				seen[nic] = true
				all = append(all, nic)
			}
		}
	}
	return all
}

// Path is one connection's worth of route: a local NIC to a remote NIC.
type Path struct {
	Local, Remote string
}

// Routes pairs local and remote NICs into paths, preferred first. The
// preferred paths zip the two preferred lists (local i with remote i,
// wrapping the shorter list), so n NICs on each side give n disjoint paths,
// the way rails pair up in an RDMA cluster. The secondary paths are every
// other pairing of all NICs, those with more preferred ends first.
func Routes(local, remote NICs) (preferred, secondary []Path) {
	lp, rp := local.Preferred, remote.Preferred
	if len(lp) == 0 || len(rp) == 0 {
		return nil, nil
	}
	seen := map[Path]bool{}
	for i := range max(len(lp), len(rp)) {
		p := Path{lp[i%len(lp)], rp[i%len(rp)]}
		if !seen[p] {
			seen[p] = true
			preferred = append(preferred, p)
		}
	}
	type ranked struct {
		p    Path
		rank int
	}
	var rest []ranked
	for li, l := range slices.Concat(lp, local.Secondary) {
		for ri, r := range slices.Concat(rp, remote.Secondary) {
			p := Path{l, r}
			if seen[p] {
				continue
			}
			seen[p] = true
			rank := 0
			if li >= len(lp) {
				rank++
			}
			if ri >= len(rp) {
				rank++
			}
			rest = append(rest, ranked{p, rank})
		}
	}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].rank < rest[j].rank })
	for _, r := range rest {
		secondary = append(secondary, r.p)
	}
	return preferred, secondary
}
