package scheduler

import (
	"bytes"
	"errors"
	"testing"
)

// The decoders must never panic, and must either fail with their sentinel
// or return something that satisfies the limits they enforce.

func FuzzReadPrefillProfile(f *testing.F) {
	f.Add([]byte("input_len,prefix_len,seconds\n1024,0,0.1\n1024,512,0.05\n"))
	f.Add(DefaultProfile())
	f.Add([]byte("# c\n\ninput_len, prefix_len, seconds\n1,1,0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		samples, err := ReadPrefillProfile(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrProfile) {
				t.Fatalf("error %v does not wrap ErrProfile", err)
			}
			return
		}
		for _, s := range samples {
			if s.InputLen < 1 || s.PrefixLen < 0 || s.PrefixLen > s.InputLen || !(s.Seconds >= 0) {
				t.Fatalf("invalid sample accepted: %+v", s)
			}
		}
		if m, err := FitPrefill(samples); err == nil {
			_ = m.Seconds(1000, 10) // must not panic
		} else if !errors.Is(err, ErrProfile) {
			t.Fatalf("fit error %v does not wrap ErrProfile", err)
		}
	})
}

func FuzzReadDecodeProfile(f *testing.F) {
	f.Add([]byte("batch_size,kv_tokens,seconds\n1,1000,0.02\n8,100000,0.03\n64,800000,0.09\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		samples, err := ReadDecodeProfile(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrProfile) {
				t.Fatalf("error %v does not wrap ErrProfile", err)
			}
			return
		}
		for _, s := range samples {
			if s.BatchSize < 1 || s.KVTokens < 0 || !(s.Seconds >= 0) {
				t.Fatalf("invalid sample accepted: %+v", s)
			}
		}
	})
}

func FuzzDecodeScheduleRequest(f *testing.F) {
	f.Add([]byte(`{"namespace":"acme/llama","tokens":[1,2,3]}`))
	f.Add([]byte(`{"request_id":"r1","keys":["` + testKey("a").String() + `"],"input_tokens":300,"output_tokens":20}`))
	f.Add([]byte(`{"namespace":"acme/llama","block_size":256,"tokens":[4294967295]}`))
	f.Add([]byte(`{"keys":[]}`))
	l := Limits{MaxTokens: 1000, MaxKeys: 8}
	l.EnsureDefaults()
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeScheduleRequest(b, l, 256)
		if err != nil {
			if !errors.Is(err, ErrRequest) {
				t.Fatalf("error %v does not wrap ErrRequest", err)
			}
			return
		}
		if req.InputTokens < 1 || req.InputTokens > l.MaxTokens || len(req.Keys) > l.MaxKeys+l.MaxTokens/256 || len(req.Keys) > (req.InputTokens+255)/256 || req.OutputTokens < 0 {
			t.Fatalf("accepted a request outside the limits: %d tokens, %d keys, %d output", req.InputTokens, len(req.Keys), req.OutputTokens)
		}
	})
}

func FuzzDecodeQueryRequest(f *testing.F) {
	f.Add([]byte(`{"namespace":"acme/llama","tokens":[1,2,3]}`))
	f.Add([]byte(`{"keys":["` + testKey("a").String() + `"]}`))
	l := Limits{MaxTokens: 1000, MaxKeys: 8}
	l.EnsureDefaults()
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := DecodeQueryRequest(b, l, 256)
		if err != nil {
			if !errors.Is(err, ErrRequest) {
				t.Fatalf("error %v does not wrap ErrRequest", err)
			}
			return
		}
		if len(keys) > l.MaxKeys+l.MaxTokens/256 {
			t.Fatalf("%d keys", len(keys))
		}
	})
}

func FuzzDecodeBlockUpdate(f *testing.F) {
	f.Add([]byte(`{"added":["` + testKey("a").String() + `"],"tier":1}`))
	f.Add([]byte(`{"reset":true,"removed":["` + testKey("b").String() + `"]}`))
	l := Limits{MaxKeys: 4}
	l.EnsureDefaults()
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeBlockUpdate(b, l)
		if err != nil {
			if !errors.Is(err, ErrRequest) {
				t.Fatalf("error %v does not wrap ErrRequest", err)
			}
			return
		}
		if len(u.Added)+len(u.Removed) > l.MaxKeys || u.Tiers == 0 {
			t.Fatalf("accepted %+v", u)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add([]byte(`{"queue_seconds":1.5}`))
	f.Add([]byte(`{"batch":12,"kv_tokens":100000}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeHeartbeat(b)
		if err != nil {
			if !errors.Is(err, ErrRequest) {
				t.Fatalf("error %v does not wrap ErrRequest", err)
			}
			return
		}
		if l.QueueTime < 0 || l.Batch < 0 || l.KVTokens < 0 {
			t.Fatalf("accepted %+v", l)
		}
	})
}

func FuzzDecodeInstance(f *testing.F) {
	f.Add([]byte(`{"id":"p0","role":"prefill","addr":"10.0.0.1:9000","capacity":3000000}`))
	f.Add([]byte(`{"id":"s-1","role":"store"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := DecodeInstance(b)
		if err != nil {
			if !errors.Is(err, ErrRequest) && !errors.Is(err, ErrInstance) {
				t.Fatalf("error %v wraps neither ErrRequest nor ErrInstance", err)
			}
			return
		}
		if in.Validate() != nil {
			t.Fatalf("accepted invalid %+v", in)
		}
	})
}
