// Package replication is `yuebing bench replication`: a trace replayed over
// simulated nodes with and without the replication core (package replicate),
// reporting hot keys' replica counts over time and the share of hits served
// locally.
package replication
