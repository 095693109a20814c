package wire

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"

	"github.com/yuebing/yuebing/rdma"
)

// HelloMsg is the client's first frame: the versions it speaks, its session
// and the cluster token. Layout: min version (1), max version (1), two zero
// bytes, session (8), then the token (at most rdma.MaxTokenLen bytes).
//
// The session is a random number a client picks once; it scopes Fence: a
// client may only fence connections of its own session.
type HelloMsg struct {
	Min, Max uint8
	Session  uint64
	Token    []byte
}

// MaxHello bounds a Hello payload.
const MaxHello = 12 + rdma.MaxTokenLen

// Append encodes m after dst.
func (m HelloMsg) Append(dst []byte) []byte {
	dst = append(dst, m.Min, m.Max, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, m.Session)
	return append(dst, m.Token...)
}

// ParseHello decodes a Hello payload.
func ParseHello(b []byte) (HelloMsg, error) {
	if len(b) < 12 || len(b) > MaxHello {
		return HelloMsg{}, fmt.Errorf("%w: hello of %d bytes", rdma.ErrProtocol, len(b))
	}
	if b[2] != 0 || b[3] != 0 {
		return HelloMsg{}, fmt.Errorf("%w: hello reserved bytes set", rdma.ErrProtocol)
	}
	m := HelloMsg{Min: b[0], Max: b[1], Session: binary.LittleEndian.Uint64(b[4:]), Token: b[12:]}
	if m.Min == 0 || m.Min > m.Max {
		return HelloMsg{}, fmt.Errorf("%w: hello versions [%d, %d]", rdma.ErrProtocol, m.Min, m.Max)
	}
	return m, nil
}

// Negotiate picks the highest version both sides speak.
func Negotiate(m HelloMsg) (uint8, error) {
	v := min(m.Max, MaxVersion)
	if v < m.Min || v < MinVersion {
		return 0, fmt.Errorf("%w: peer speaks [%d, %d], we speak [%d, %d]", rdma.ErrVersion, m.Min, m.Max, MinVersion, MaxVersion)
	}
	return v, nil
}

// TokenEqual compares tokens in constant time. Hashing first means the time
// does not depend on the lengths either.
func TokenEqual(a, b []byte) bool {
	ha, hb := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
