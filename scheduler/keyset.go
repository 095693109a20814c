package scheduler

import (
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/keytable"
)

// keySets maps block keys to instance sets: the hot structure of every
// decision (one lookup per key of a prompt), on the table of
// internal/keytable. A key whose set is empty is not held.
type keySets struct{ t *keytable.Table[instSet] }

func newKeySets() *keySets { return &keySets{t: keytable.New[instSet]()} }

// get returns k's set (empty when absent).
func (s *keySets) get(k *block.Key) instSet {
	if v := s.t.Find(k); v != nil {
		return *v
	}
	return instSet{}
}

// put sets k's set; an empty set deletes k.
func (s *keySets) put(k *block.Key, set instSet) {
	if set.empty() {
		s.t.Remove(k)
		return
	}
	v, _ := s.t.Upsert(k)
	*v = set
}

// len returns the number of keys held by any instance.
func (s *keySets) len() int { return s.t.Len() }

// update applies f to every key's set, deleting keys whose set becomes
// empty: for rare, global changes (an instance leaving).
func (s *keySets) update(f func(*instSet)) {
	s.t.Filter(func(v *instSet) bool {
		f(v)
		return !v.empty()
	})
}
