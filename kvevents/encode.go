package kvevents

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// AppendBatch appends b encoded as vLLM encodes an event batch with
// msgspec's array layout: [ts, [events...], data_parallel_rank], each event
// a tagged array in its declared field order. Hashes go out as vLLM sends
// them: integers as integers, bytes as bytes. A DPRank below 0 is omitted.
func AppendBatch(dst []byte, b Batch) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	e := msgpack.NewEncoder(buf)
	n := 3
	if b.DPRank < 0 {
		n = 2
	}
	err := e.EncodeArrayLen(n)
	if err == nil {
		err = e.EncodeFloat64(b.TS)
	}
	if err == nil {
		err = e.EncodeArrayLen(len(b.Events))
	}
	for i := range b.Events {
		if err != nil {
			break
		}
		err = encodeEvent(e, &b.Events[i])
	}
	if err == nil && n == 3 {
		err = e.EncodeInt(int64(b.DPRank))
	}
	if err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

func encodeEvent(e *msgpack.Encoder, ev *Event) error {
	switch ev.Kind {
	case BlockStored:
		if len(ev.Tokens) != len(ev.Hashes)*ev.BlockSize {
			return fmt.Errorf("%w: BlockStored with %d tokens for %d blocks of %d", ErrMalformed, len(ev.Tokens), len(ev.Hashes), ev.BlockSize)
		}
		// [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
		// and, for a group other than 0, [lora_name, extra_keys, group_idx].
		n := 7
		if ev.Group != 0 {
			n = 10
		}
		err := firstErr(e.EncodeArrayLen(n), e.EncodeString("BlockStored"), encodeHashes(e, ev.Hashes), encodeOptHash(e, ev.Parent))
		if err != nil {
			return err
		}
		if err := e.EncodeArrayLen(len(ev.Tokens)); err != nil {
			return err
		}
		for _, t := range ev.Tokens {
			if err := e.EncodeUint(uint64(t)); err != nil {
				return err
			}
		}
		err = firstErr(e.EncodeInt(int64(ev.BlockSize)), e.EncodeNil(), encodeMedium(e, ev.Medium))
		if err != nil || ev.Group == 0 {
			return err
		}
		return firstErr(e.EncodeNil(), e.EncodeNil(), e.EncodeInt(int64(ev.Group)))
	case BlockRemoved:
		if ev.Group != 0 {
			return firstErr(e.EncodeArrayLen(4), e.EncodeString("BlockRemoved"), encodeHashes(e, ev.Hashes), encodeMedium(e, ev.Medium), e.EncodeInt(int64(ev.Group)))
		}
		return firstErr(e.EncodeArrayLen(3), e.EncodeString("BlockRemoved"), encodeHashes(e, ev.Hashes), encodeMedium(e, ev.Medium))
	case AllBlocksCleared:
		return firstErr(e.EncodeArrayLen(1), e.EncodeString("AllBlocksCleared"))
	}
	return fmt.Errorf("%w: event kind %d", ErrMalformed, ev.Kind)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func encodeHashes(e *msgpack.Encoder, hs []Hash) error {
	if err := e.EncodeArrayLen(len(hs)); err != nil {
		return err
	}
	for _, h := range hs {
		if err := encodeHash(e, h); err != nil {
			return err
		}
	}
	return nil
}

func encodeOptHash(e *msgpack.Encoder, h Hash) error {
	if h == "" {
		return e.EncodeNil()
	}
	return encodeHash(e, h)
}

func encodeHash(e *msgpack.Encoder, h Hash) error {
	switch {
	case len(h) == 9 && h[0] == 'i':
		return e.EncodeInt(int64(binary.BigEndian.Uint64([]byte(h[1:]))))
	case len(h) > 1 && h[0] == 'b':
		return e.EncodeBytes([]byte(h[1:]))
	case len(h) > 5 && h[0] == 'g':
		// A group's hash goes out as the engine's, the event's group_idx
		// beside it.
		return encodeHash(e, h[5:])
	}
	return fmt.Errorf("%w: block hash %q is neither an integer nor bytes", ErrMalformed, string(h))
}

func encodeMedium(e *msgpack.Encoder, m string) error {
	if m == "" {
		return e.EncodeNil()
	}
	return e.EncodeString(m)
}
