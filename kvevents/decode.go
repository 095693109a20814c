package kvevents

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Limits bound what one batch may hold, so a hostile or broken publisher
// cannot make the decoder allocate without bound.
type Limits struct {
	// MaxEvents per batch. Default: 65536.
	MaxEvents int
	// MaxHashes per event. Default: 65536.
	MaxHashes int
	// MaxTokens per event. Default: 1<<21, a 2M-token prompt.
	MaxTokens int
}

// EnsureDefaults fills zero fields with their defaults.
func (l *Limits) EnsureDefaults() {
	if l.MaxEvents == 0 {
		l.MaxEvents = 1 << 16
	}
	if l.MaxHashes == 0 {
		l.MaxHashes = 1 << 16
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = 1 << 21
	}
}

// maxHashBytes bounds one bytes hash: vLLM's are 32-byte SHA-256 digests.
const maxHashBytes = 64

// maxDepth bounds the nesting of values the decoder skips (extra keys,
// fields of newer releases); real payloads nest three or four deep.
const maxDepth = 16

// DecodeBatch decodes one msgpack event batch as vLLM encodes it, in either
// of its two layouts: arrays ([ts, events, dp_rank], each event a tagged
// array ["BlockStored", ...]) or maps ({"ts":..., "events": [...]}, each
// event a map with a "type" tag). Fields a newer release appends are
// skipped. Zero Limits fields take their defaults.
func DecodeBatch(payload []byte, l Limits) (Batch, error) {
	l.EnsureDefaults()
	r := bytes.NewReader(payload)
	d := &decoder{payload: payload, r: r, d: msgpack.NewDecoder(r), l: l}
	b, err := d.batch()
	if err != nil {
		return Batch{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	b.Unknown = d.unknown
	if r.Len() != 0 {
		return Batch{}, fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, r.Len())
	}
	return b, nil
}

type decoder struct {
	// payload is what r reads.
	payload []byte
	r       *bytes.Reader
	d       *msgpack.Decoder
	l       Limits
	// unknown counts events of unknown kinds skipped.
	unknown int
}

// seqLen reads an array or map header, refusing lengths the remaining
// bytes cannot hold (each element takes at least one byte) so a header
// cannot make us allocate.
func (d *decoder) arrayLen() (int, error) {
	n, err := d.d.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > d.r.Len() {
		return 0, fmt.Errorf("array of %d elements in %d bytes", n, d.r.Len())
	}
	return n, nil
}

func (d *decoder) mapLen() (int, error) {
	n, err := d.d.DecodeMapLen()
	if err != nil {
		return 0, err
	}
	if n < 0 || 2*n > d.r.Len() {
		return 0, fmt.Errorf("map of %d entries in %d bytes", n, d.r.Len())
	}
	return n, nil
}

func (d *decoder) peek() (byte, error) { return d.d.PeekCode() }

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

// skip skips one value of any type, bounding its nesting.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("values nested deeper than %d", maxDepth)
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch {
	case isArray(c):
		n, err := d.arrayLen()
		if err != nil {
			return err
		}
		for range n {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case isMap(c):
		n, err := d.mapLen()
		if err != nil {
			return err
		}
		for range 2 * n {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	}
	return d.d.Skip()
}

func (d *decoder) isNil() (bool, error) {
	c, err := d.peek()
	if err != nil {
		return false, err
	}
	if c == msgpcode.Nil {
		return true, d.d.DecodeNil()
	}
	return false, nil
}

func (d *decoder) batch() (Batch, error) {
	b := Batch{DPRank: -1}
	c, err := d.peek()
	if err != nil {
		return b, err
	}
	if isMap(c) {
		return b, d.batchMap(&b)
	}
	n, err := d.arrayLen()
	if err != nil {
		return b, fmt.Errorf("batch: %w", err)
	}
	if n < 2 {
		return b, fmt.Errorf("batch of %d fields, want at least ts and events", n)
	}
	if b.TS, err = d.ts(); err != nil {
		return b, err
	}
	if b.Events, err = d.events(); err != nil {
		return b, err
	}
	if n >= 3 {
		if b.DPRank, err = d.rank(); err != nil {
			return b, err
		}
	}
	for i := 3; i < n; i++ {
		if err := d.skip(1); err != nil {
			return b, err
		}
	}
	return b, nil
}

func (d *decoder) batchMap(b *Batch) error {
	n, err := d.mapLen()
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	var haveTS, haveEvents bool
	for range n {
		name, err := d.d.DecodeString()
		if err != nil {
			return fmt.Errorf("batch field name: %w", err)
		}
		switch name {
		case "ts":
			b.TS, err = d.ts()
			haveTS = true
		case "events":
			b.Events, err = d.events()
			haveEvents = true
		case "data_parallel_rank":
			b.DPRank, err = d.rank()
		default:
			err = d.skip(1)
		}
		if err != nil {
			return err
		}
	}
	if !haveTS || !haveEvents {
		return fmt.Errorf("batch without ts or events")
	}
	return nil
}

func (d *decoder) ts() (float64, error) {
	ts, err := d.d.DecodeFloat64()
	if err != nil {
		return 0, fmt.Errorf("ts: %w", err)
	}
	if math.IsNaN(ts) || math.IsInf(ts, 0) {
		return 0, fmt.Errorf("ts is %v", ts)
	}
	return ts, nil
}

func (d *decoder) rank() (int, error) {
	if null, err := d.isNil(); err != nil || null {
		return -1, err
	}
	r, err := d.d.DecodeInt64()
	if err != nil {
		return 0, fmt.Errorf("data_parallel_rank: %w", err)
	}
	if r < 0 || r > math.MaxInt32 {
		return 0, fmt.Errorf("data_parallel_rank %d", r)
	}
	return int(r), nil
}

func (d *decoder) events() ([]Event, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if n > d.l.MaxEvents {
		return nil, fmt.Errorf("%d events, limit %d", n, d.l.MaxEvents)
	}
	evs := make([]Event, 0, n)
	for i := range n {
		e, err := d.event()
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		if e.Kind == 0 {
			d.unknown++
			continue
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// Field positions of the array layout, after the tag, in vLLM's
// declaration order.
var (
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx"}
	removedFields = []string{"block_hashes", "medium", "group_idx"}
)

// kindOf returns the kind of a tag and its array layout's fields; kind 0
// for a tag of a kind not known here.
func kindOf(tag string) (Kind, []string) {
	switch tag {
	case "BlockStored":
		return BlockStored, storedFields
	case "BlockRemoved":
		return BlockRemoved, removedFields
	case "AllBlocksCleared":
		return AllBlocksCleared, nil
	}
	return 0, nil
}

func (d *decoder) event() (Event, error) {
	var e Event
	c, err := d.peek()
	if err != nil {
		return e, err
	}
	var seen map[string]bool
	if isMap(c) {
		seen, err = d.eventMap(&e)
	} else {
		seen, err = d.eventArray(&e)
	}
	if err != nil || e.Kind == 0 {
		return e, err
	}
	switch e.Kind {
	case BlockStored:
		if !seen["block_hashes"] {
			return e, fmt.Errorf("BlockStored without block_hashes")
		}
		// What vLLM sends for blocks it cannot describe by tokens: stored
		// hashes, nothing to key them by.
		if !seen["token_ids"] || !seen["block_size"] || e.BlockSize < 1 || len(e.Tokens) != len(e.Hashes)*e.BlockSize {
			e.Unkeyable = true
		}
	case BlockRemoved:
		if !seen["block_hashes"] {
			return e, fmt.Errorf("BlockRemoved without block_hashes")
		}
	}
	if e.Group != 0 {
		for i, h := range e.Hashes {
			e.Hashes[i] = h.InGroup(e.Group)
		}
		e.Parent = e.Parent.InGroup(e.Group)
	}
	return e, nil
}

func (d *decoder) eventArray(e *Event) (map[string]bool, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("event without tag")
	}
	tag, err := d.d.DecodeString()
	if err != nil {
		return nil, fmt.Errorf("event tag: %w", err)
	}
	var fields []string
	if e.Kind, fields = kindOf(tag); e.Kind == 0 {
		// A kind of a newer release: skipped whole.
		for i := 1; i < n; i++ {
			if err := d.skip(1); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	seen := make(map[string]bool, n)
	for i := 1; i < n; i++ {
		name := ""
		if i-1 < len(fields) {
			name = fields[i-1]
		}
		if err := d.field(e, name); err != nil {
			return nil, err
		}
		seen[name] = true
	}
	return seen, nil
}

func (d *decoder) eventMap(e *Event) (map[string]bool, error) {
	n, err := d.mapLen()
	if err != nil {
		return nil, err
	}
	// The tag may come anywhere in the map; fields are kept by name and
	// checked against the kind once it is known.
	seen := make(map[string]bool, n)
	unknown := false
	for range n {
		name, err := d.d.DecodeString()
		if err != nil {
			return nil, fmt.Errorf("event field name: %w", err)
		}
		if name == "type" {
			tag, err := d.d.DecodeString()
			if err != nil {
				return nil, fmt.Errorf("event tag: %w", err)
			}
			if e.Kind, _ = kindOf(tag); e.Kind == 0 {
				unknown = true
			}
			continue
		}
		if unknown {
			// A kind of a newer release (its tag comes first, as msgspec
			// writes it): its fields are skipped, whatever their types.
			if err := d.skip(1); err != nil {
				return nil, err
			}
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("field %s twice", name)
		}
		if err := d.field(e, name); err != nil {
			return nil, err
		}
		seen[name] = true
	}
	if unknown {
		*e = Event{}
		return nil, nil
	}
	if e.Kind == 0 {
		return nil, fmt.Errorf("event without type tag")
	}
	if e.Kind != BlockStored {
		for _, f := range []string{"parent_block_hash", "token_ids", "block_size"} {
			if seen[f] {
				return nil, fmt.Errorf("%s event with %s", e.Kind, f)
			}
		}
	}
	return seen, nil
}

// field decodes the named field into e; unknown names are skipped.
func (d *decoder) field(e *Event, name string) error {
	var err error
	switch name {
	case "block_hashes":
		e.Hashes, err = d.hashes()
	case "parent_block_hash":
		e.Parent, err = d.optHash()
	case "token_ids":
		var nested bool
		e.Tokens, nested, err = d.tokens()
		e.Unkeyable = e.Unkeyable || nested
	case "block_size":
		// 0 is what vLLM's CPU offloading connector sends for blocks it
		// does not describe (the event is then unkeyable).
		var bs int64
		if bs, err = d.d.DecodeInt64(); err == nil && (bs < 0 || bs > 1<<20) {
			err = fmt.Errorf("block size %d", bs)
		}
		e.BlockSize = int(bs)
	case "group_idx":
		var null bool
		if null, err = d.isNil(); err == nil && !null {
			var g int64
			if g, err = d.d.DecodeInt64(); err == nil && (g < 0 || g > 1<<16) {
				err = fmt.Errorf("group %d", g)
			}
			e.Group = int(g)
		}
	case "lora_id", "lora_name", "extra_keys":
		var null bool
		if null, err = d.isNil(); err == nil && !null {
			if name == "extra_keys" {
				e.Extra, err = d.extraKeys()
			} else {
				e.LoRA = true
				err = d.skip(1)
			}
		}
	case "medium":
		var null bool
		if null, err = d.isNil(); err == nil && !null {
			e.Medium, err = d.d.DecodeString()
			if err == nil && len(e.Medium) > 64 {
				err = fmt.Errorf("medium of %d bytes", len(e.Medium))
			}
		}
	default:
		err = d.skip(1)
	}
	if err != nil && name != "" {
		return fmt.Errorf("%s: %w", name, err)
	}
	return err
}

func (d *decoder) hashes() ([]Hash, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, err
	}
	if n > d.l.MaxHashes {
		return nil, fmt.Errorf("%d hashes, limit %d", n, d.l.MaxHashes)
	}
	hs := make([]Hash, 0, n)
	for range n {
		h, err := d.hash()
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
	return hs, nil
}

func (d *decoder) optHash() (Hash, error) {
	if null, err := d.isNil(); err != nil || null {
		return "", err
	}
	return d.hash()
}

func (d *decoder) hash() (Hash, error) {
	c, err := d.peek()
	if err != nil {
		return "", err
	}
	switch {
	case msgpcode.IsFixedNum(c) || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64:
		v, err := d.d.DecodeInt64()
		return HashInt(uint64(v)), err
	case c == msgpcode.Uint8 || c == msgpcode.Uint16 || c == msgpcode.Uint32 || c == msgpcode.Uint64:
		v, err := d.d.DecodeUint64()
		return HashInt(v), err
	case c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32:
		n, err := d.d.DecodeBytesLen()
		if err != nil {
			return "", err
		}
		if n < 1 || n > maxHashBytes || n > d.r.Len() {
			return "", fmt.Errorf("block hash of %d bytes", n)
		}
		// One allocation: the hash's string, straight from the payload.
		off := len(d.payload) - d.r.Len()
		h := HashBytes(d.payload[off : off+n])
		if _, err := d.r.Seek(int64(n), io.SeekCurrent); err != nil {
			return "", err
		}
		return h, nil
	}
	return "", fmt.Errorf("block hash of msgpack type 0x%02x, want an integer or bytes", c)
}

// tokens reads token ids. nested reports ids that are lists (SGLang sends
// pairs under EAGLE speculative decoding): skipped, and the event cannot
// be keyed by them.
func (d *decoder) tokens() (ts []uint32, nested bool, err error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, false, err
	}
	if n > d.l.MaxTokens {
		return nil, false, fmt.Errorf("%d tokens, limit %d", n, d.l.MaxTokens)
	}
	ts = make([]uint32, n)
	for i := range ts {
		v, ok := d.token()
		if !ok {
			if c, err := d.peek(); err == nil && isArray(c) {
				if err := d.skip(1); err != nil {
					return nil, false, err
				}
				nested = true
				continue
			}
			// Any other encoding of an integer, or an error: the generic
			// decoder reads it or says what is wrong.
			x, err := d.d.DecodeInt64()
			if err != nil {
				return nil, false, err
			}
			if x < 0 || x > math.MaxUint32 {
				return nil, false, fmt.Errorf("token %d at %d", x, i)
			}
			v = uint32(x)
		}
		ts[i] = v
	}
	return ts, nested, nil
}

// token reads a token id in the encodings msgpack writers use for
// non-negative integers below 2^32 (a positive fixint, uint8, uint16 or
// uint32) straight from the payload: the generic decoder costs several
// times more, and token ids are most of a batch's bytes. It reads nothing
// and reports false for any other encoding.
func (d *decoder) token() (uint32, bool) {
	c, err := d.r.ReadByte()
	if err != nil {
		return 0, false
	}
	var n int
	switch {
	case c <= msgpcode.PosFixedNumHigh:
		return uint32(c), true
	case c == msgpcode.Uint8:
		n = 1
	case c == msgpcode.Uint16:
		n = 2
	case c == msgpcode.Uint32:
		n = 4
	default:
		d.r.UnreadByte()
		return 0, false
	}
	if d.r.Len() < n {
		d.r.UnreadByte()
		return 0, false
	}
	var b [4]byte
	d.r.Read(b[4-n:])
	return binary.BigEndian.Uint32(b[:]), true
}

// extraKeys reads vLLM's per-block extra keys and reports whether any
// block has some: a list with one entry (nil or a tuple) per block.
func (d *decoder) extraKeys() (bool, error) {
	n, err := d.arrayLen()
	if err != nil {
		return false, err
	}
	any := false
	for range n {
		null, err := d.isNil()
		if err != nil {
			return false, err
		}
		if !null {
			any = true
			if err := d.skip(2); err != nil {
				return false, err
			}
		}
	}
	return any, nil
}
