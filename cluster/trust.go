package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Nodes trust what etcd holds only as far as the cluster token vouches for
// it. A member record or a leader's campaign value is written sealed: the
// record's JSON beside an HMAC-SHA256 of it, keyed by a key derived from
// the token and bound to the etcd key (or, for a campaign, the election's
// prefix) it is stored under. A node ignores, logs and counts a record whose
// MAC does not verify, so whoever can write to etcd without the token
// cannot add a member or name a leader, and no node sends a request, the
// cluster token or a tenant's key to an address such a record names. A
// sealed record can only be replayed under its own key: at worst an old
// address of the same node, until the node registers again.

// sealed is the etcd value of a member record or a campaign.
type sealed struct {
	// Record is the JSON of a Member or a LeaderInfo, as it was signed.
	Record json.RawMessage `json:"record"`
	// MAC is the hex HMAC-SHA256 of the record and where it is stored.
	MAC string `json:"mac"`
}

// Purposes of keys derived from the cluster token: a key serves one
// purpose, so a MAC made for one use is worthless for another.
const (
	purposeRecords = "yuebing cluster records v1"
	purposeEtcd    = "yuebing embedded etcd root password v1"
)

func deriveKey(token, purpose string) []byte {
	h := hmac.New(sha256.New, []byte(token))
	h.Write([]byte(purpose))
	return h.Sum(nil)
}

// EtcdPassword is the password of the embedded etcd's root user for a
// cluster with this token: every node holding the token can compute it,
// nobody else can, and the token itself never goes to etcd.
func EtcdPassword(token string) string {
	return hex.EncodeToString(deriveKey(token, purposeEtcd))
}

// recordMAC is the MAC of a record stored under where.
func recordMAC(key []byte, where string, record []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(where))
	h.Write([]byte{0})
	h.Write(record)
	return h.Sum(nil)
}

// seal returns the etcd value holding v, signed for where.
func (n *Node) seal(where string, v any) (string, error) {
	rec, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(sealed{Record: rec, MAC: hex.EncodeToString(recordMAC(n.recordKey, where, rec))})
	return string(b), err
}

// unseal decodes into v a value sealed for where. ErrBadRecord: the value
// is not a sealed record, or its MAC does not verify.
func (n *Node) unseal(where string, val []byte, v any) error {
	var s sealed
	if err := json.Unmarshal(val, &s); err != nil || len(s.Record) == 0 {
		return fmt.Errorf("%w: %s: not a sealed record", ErrBadRecord, where)
	}
	mac, err := hex.DecodeString(s.MAC)
	if err != nil || !hmac.Equal(mac, recordMAC(n.recordKey, where, s.Record)) {
		return fmt.Errorf("%w: %s: its MAC does not verify with the cluster token", ErrBadRecord, where)
	}
	if err := json.Unmarshal(s.Record, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadRecord, where, err)
	}
	return nil
}
