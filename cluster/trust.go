package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
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
	purposeRecords  = "yuebing cluster records v1"
	purposeEtcd     = "yuebing embedded etcd root password v1"
	purposeRequests = "yuebing internal requests v1"
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

// Nodes do not put the cluster token on the internal API's wire: a request
// carries "Authorization: Yuebing-HMAC <unix ms>:<hex MAC>", an
// HMAC-SHA256 under a key derived from the token over the method, the
// path, that time and the body's SHA-256 (sent in HeaderBodySHA256), so
// whoever receives or overhears it learns no credential. A receiver takes
// it within MaxClockSkew of its own clock; inside that window a request
// overheard on the network could be sent again as it is (the internal API
// belongs on a private network). "Bearer TOKEN" is still taken, for tools.
const (
	authScheme = "Yuebing-HMAC"
	// HeaderBodySHA256 is the hex SHA-256 of a signed request's body.
	HeaderBodySHA256 = "X-Yuebing-Content-Sha256"
	// MaxClockSkew is how far a signed request's time may be from the
	// receiver's clock: nodes' clocks are kept by NTP, well within it.
	MaxClockSkew = 2 * time.Minute
)

func requestMAC(key []byte, method, path string, ms int64, bodySum string) []byte {
	h := hmac.New(sha256.New, key)
	fmt.Fprintf(h, "%s\n%s\n%d\n%s", method, path, ms, bodySum)
	return h.Sum(nil)
}

// sign authenticates req, whose body is body, as this cluster's.
func (n *Node) sign(req *http.Request, body []byte) {
	sum := sha256.Sum256(body)
	bodySum := hex.EncodeToString(sum[:])
	ms := time.Now().UnixMilli()
	req.Header.Set(HeaderBodySHA256, bodySum)
	req.Header.Set("Authorization", authScheme+" "+strconv.FormatInt(ms, 10)+":"+
		hex.EncodeToString(requestMAC(n.requestKey, req.Method, req.URL.Path, ms, bodySum)))
}

// authenticate checks an internal request's credentials at time now. A
// signed request's MAC is checked before its body is read, so nobody
// without the token makes the node buffer anything; its body (at most
// maxBody bytes) is then read and checked against the signed digest, and
// r.Body replaced by the bytes read. The errors are ErrUnauthorized, or
// ErrBadRequest for a body over maxBody.
func (n *Node) authenticate(r *http.Request, now time.Time, maxBody int64) error {
	v := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
		got, want := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(n.opts.Token))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return fmt.Errorf("%w: the internal API needs the cluster token", ErrUnauthorized)
		}
		return nil
	}
	rest, ok := strings.CutPrefix(v, authScheme+" ")
	msStr, macHex, ok2 := strings.Cut(rest, ":")
	ms, err := strconv.ParseInt(msStr, 10, 64)
	mac, err2 := hex.DecodeString(macHex)
	bodySum := r.Header.Get(HeaderBodySHA256)
	if !ok || !ok2 || err != nil || err2 != nil || len(bodySum) != 2*sha256.Size {
		return fmt.Errorf("%w: the internal API needs the cluster's signature or token", ErrUnauthorized)
	}
	if d := now.Sub(time.UnixMilli(ms)); d > MaxClockSkew || d < -MaxClockSkew {
		return fmt.Errorf("%w: a request signed %v from this node's clock (at most %v)", ErrUnauthorized, d.Round(time.Millisecond), MaxClockSkew)
	}
	if !hmac.Equal(mac, requestMAC(n.requestKey, r.Method, r.URL.Path, ms, bodySum)) {
		return fmt.Errorf("%w: the request's signature does not verify with the cluster token", ErrUnauthorized)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err)
	}
	if int64(len(body)) > maxBody {
		return fmt.Errorf("%w: a body over %d bytes", ErrBadRequest, maxBody)
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != bodySum {
		return fmt.Errorf("%w: the body is not the one signed", ErrUnauthorized)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}
