package kvevents

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// Kind is the type of one KV cache event.
type Kind uint8

// The event kinds vLLM publishes.
const (
	BlockStored Kind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

func (k Kind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Hash is an engine's block hash. vLLM sends either an integer (older
// releases) or the bytes of a digest; the first byte of a Hash says which,
// so the integer 5 and the one byte 0x05 never compare equal. The zero Hash
// means "none" (a block without parent).
type Hash string

// HashInt returns the Hash of an integer block hash.
func HashInt(v uint64) Hash {
	var b [9]byte
	b[0] = 'i'
	binary.BigEndian.PutUint64(b[1:], v)
	return Hash(b[:])
}

// HashBytes returns the Hash of a bytes block hash.
func HashBytes(p []byte) Hash { return Hash("b" + string(p)) }

// InGroup returns h as a hash of KV cache group g. A hybrid model's engine
// (full and sliding-window attention, or Mamba layers) keeps one cache
// per group and reports each group's blocks under the same hashes; the
// groups evict apart, so each group's copy of a hash is tracked as a hash
// of its own. Group 0 is h itself.
func (h Hash) InGroup(g int) Hash {
	if g == 0 || h == "" {
		return h
	}
	var b [5]byte
	b[0] = 'g'
	binary.BigEndian.PutUint32(b[1:], uint32(g))
	return Hash(string(b[:]) + string(h))
}

func (h Hash) String() string {
	switch {
	case h == "":
		return "none"
	case h[0] == 'g' && len(h) > 5:
		return "g" + strconv.Itoa(int(binary.BigEndian.Uint32([]byte(h[1:5])))) + "/" + h[5:].String()
	case h[0] == 'i' && len(h) == 9:
		return strconv.FormatInt(int64(binary.BigEndian.Uint64([]byte(h[1:]))), 10)
	default:
		return hex.EncodeToString([]byte(h[1:]))
	}
}

// Event is one decoded KV cache event. Fields not meaningful for a Kind are
// zero.
type Event struct {
	Kind Kind
	// Hashes are the engine's hashes of the blocks stored or removed, in
	// chain order for BlockStored.
	Hashes []Hash
	// Parent is the hash of the block the first stored block follows;
	// empty for a chain's first block.
	Parent Hash
	// Tokens are the token ids of all stored blocks, BlockSize per block.
	Tokens []uint32
	// BlockSize is the engine's block size in tokens.
	BlockSize int
	// LoRA is true when the blocks belong to a LoRA adapter (lora_id or
	// lora_name set): their KV differs from the base model's.
	LoRA bool
	// Extra is true when the engine hashed more than the tokens (multimodal
	// inputs, a cache salt): tokens alone do not identify such blocks.
	Extra bool
	// Medium is where the blocks live: "GPU" (or empty, which vLLM means
	// as GPU), "CPU", or a storage medium.
	Medium string
	// Group is the KV cache group of a hybrid model (vLLM's group_idx);
	// Hashes and Parent are already that group's (Hash.InGroup).
	Group int
	// Unkeyable marks a BlockStored whose token ids do not give each of
	// its blocks BlockSize tokens, so its blocks cannot be keyed: vLLM
	// leaves out the null blocks of hybrid models but keeps their tokens,
	// and its CPU offloading connector sends no tokens at all. Its hashes
	// are kept (a later BlockRemoved names them); Tokens may be anything.
	Unkeyable bool
}

// Batch is one published event batch.
type Batch struct {
	// TS is the engine's wall clock when it published the batch, in
	// seconds since the Unix epoch.
	TS     float64
	Events []Event
	// DPRank is the data-parallel rank of the publisher; -1 when absent.
	DPRank int
	// Unknown counts events of a kind this decoder does not know (a newer
	// release's), skipped.
	Unknown int
}
