package block

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the implementation")

type vectorFile struct {
	Comment []string        `json:"comment"`
	Chained []chainedVector `json:"chained"`
	Opaque  []opaqueVector  `json:"opaque"`
}

type chainedVector struct {
	Namespace string   `json:"namespace"`
	BlockSize int      `json:"block_size"`
	Tokens    []uint32 `json:"tokens"`
	Root      Key      `json:"root"`
	Keys      []Key    `json:"keys"`
}

type opaqueVector struct {
	Namespace string `json:"namespace"`
	RawHex    string `json:"raw_hex"`
	Key       Key    `json:"key"`
}

// vectorInputs are the cases committed in testdata/vectors.json; each covers
// something a port could get wrong.
func vectorInputs() ([]chainedVector, []opaqueVector) {
	seq := func(n int, f func(i int) uint32) []uint32 {
		s := make([]uint32, n)
		for i := range s {
			s[i] = f(i)
		}
		return s
	}
	chained := []chainedVector{
		{Namespace: "acme/llama-3-70b", BlockSize: 16, Tokens: nil},                                                         // no tokens, no keys
		{Namespace: "acme/llama-3-70b", BlockSize: 16, Tokens: seq(15, func(i int) uint32 { return uint32(i) })},            // partial block only
		{Namespace: "acme/llama-3-70b", BlockSize: 16, Tokens: seq(40, func(i int) uint32 { return uint32(i * 7) })},        // 2 blocks + partial tail
		{Namespace: "acme/llama-3-70b#s3cret", BlockSize: 16, Tokens: seq(32, func(i int) uint32 { return uint32(i * 7) })}, // salted
		{Namespace: "beta/llama-3-70b", BlockSize: 16, Tokens: seq(32, func(i int) uint32 { return uint32(i * 7) })},        // other tenant
		{Namespace: "acme/meta-llama/Llama-3.1-8B-Instruct", BlockSize: 32, Tokens: seq(64, func(i int) uint32 { return 4294967295 - uint32(i) })},
		{Namespace: "t/m", BlockSize: 256, Tokens: seq(512, func(i int) uint32 { return uint32(i*2654435761) % 128256 })},
	}
	for i := range chained {
		c := &chained[i]
		c.Root = Root(c.Namespace, c.BlockSize)
		keys, err := ChainKeys(c.Namespace, c.BlockSize, c.Tokens)
		if err != nil {
			panic(err)
		}
		c.Keys = keys
		if c.Tokens == nil {
			c.Tokens = []uint32{}
		}
	}
	opaque := []opaqueVector{
		{Namespace: "acme/llama-3-70b", RawHex: hex.EncodeToString([]byte("vllm@llama-3-70b@1@0@0123abcdkv_bytes"))},
		{Namespace: "acme/llama-3-70b", RawHex: ""},
		{Namespace: "beta/llama-3-70b", RawHex: "00ff00ff"},
	}
	for i := range opaque {
		raw, _ := hex.DecodeString(opaque[i].RawHex)
		opaque[i].Key = OpaqueKey(opaque[i].Namespace, raw)
	}
	return chained, opaque
}

const vectorsPath = "testdata/vectors.json"

func TestVectors(t *testing.T) {
	chained, opaque := vectorInputs()
	if *update {
		vf := vectorFile{
			Comment: []string{
				"yuebing block key test vectors; the derivation is specified in docs/keys.md.",
				"root = SHA-256(\"yuebing/v1\" || 0x00 || namespace || 0x00 || decimal(block_size))",
				"key[0] = SHA-256(root || tokens of block 0 as little-endian uint32); key[i] = SHA-256(key[i-1] || tokens of block i)",
				"only full blocks are keyed; opaque key = SHA-256(namespace || 0x00 || raw bytes)",
			},
			Chained: chained, Opaque: opaque,
		}
		b, err := json.MarshalIndent(vf, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(b, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Chained) != len(chained) || len(vf.Opaque) != len(opaque) {
		t.Fatalf("vector file has %d+%d cases, want %d+%d (run go test -update)", len(vf.Chained), len(vf.Opaque), len(chained), len(opaque))
	}
	for i, v := range vf.Chained {
		if got := Root(v.Namespace, v.BlockSize); got != v.Root {
			t.Errorf("case %d: root %s, want %s", i, got, v.Root)
		}
		got, err := ChainKeys(v.Namespace, v.BlockSize, v.Tokens)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if len(got) != len(v.Tokens)/v.BlockSize {
			t.Errorf("case %d: %d keys for %d tokens of block size %d", i, len(got), len(v.Tokens), v.BlockSize)
		}
		if !slices.Equal(got, v.Keys) {
			t.Errorf("case %d (%s): keys differ from the committed vectors", i, v.Namespace)
		}
	}
	for i, v := range vf.Opaque {
		raw, _ := hex.DecodeString(v.RawHex)
		if got := OpaqueKey(v.Namespace, raw); got != v.Key {
			t.Errorf("opaque case %d: %s, want %s", i, got, v.Key)
		}
	}
}

// TestVectorsIndependently recomputes the committed vectors with Python's
// hashlib, an implementation that shares no code with this package.
func TestVectorsIndependently(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("skipping: /usr/bin/python3 is not installed")
	}
	out, err := exec.Command(py, "testdata/check_vectors.py", vectorsPath).CombinedOutput()
	if err != nil {
		t.Fatalf("check_vectors.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ok") {
		t.Fatalf("check_vectors.py printed %q", out)
	}
}

func TestChainProperties(t *testing.T) {
	toks := make([]uint32, 100)
	for i := range toks {
		toks[i] = uint32(i)
	}
	a, _ := ChainKeys("alpha/m", 16, toks)
	b, _ := ChainKeys("beta/m", 16, toks)
	if len(a) != 6 {
		t.Fatalf("%d keys for 100 tokens of 16, want 6", len(a))
	}
	for i := range a {
		if a[i] == b[i] {
			t.Fatalf("tenants share key %d", i)
		}
	}
	// A shared prefix shares keys; the first differing block and every block
	// after it differ.
	other := slices.Clone(toks)
	other[40] = 999 // in block 2
	c, _ := ChainKeys("alpha/m", 16, other)
	for i := range a {
		if same := a[i] == c[i]; same != (i < 2) {
			t.Fatalf("block %d: same=%v", i, same)
		}
	}
	// Streaming and batch derivation agree.
	ch, err := NewChain("alpha/m", 16)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if k := ch.Next(toks[16*i : 16*(i+1)]); k != a[i] {
			t.Fatalf("Chain.Next block %d differs", i)
		}
	}
	// Block size is part of the root.
	if Root("alpha/m", 16) == Root("alpha/m", 32) {
		t.Fatal("roots of different block sizes are equal")
	}
	if OpaqueKey("alpha/m", []byte("x")) == OpaqueKey("beta/m", []byte("x")) {
		t.Fatal("opaque keys of different tenants are equal")
	}
}

func TestValidateNamespace(t *testing.T) {
	for _, ns := range []string{"a/b", "acme/meta-llama/Llama-3.1-8B", "t_1.x-y/m#salt", "t/m#a#b"} {
		if err := ValidateNamespace(ns); err != nil {
			t.Errorf("ValidateNamespace(%q) = %v", ns, err)
		}
	}
	bad := func(ns, want string) {
		t.Helper()
		err := ValidateNamespace(ns)
		if !errors.Is(err, ErrInvalidNamespace) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateNamespace(%q) = %v, want ErrInvalidNamespace mentioning %q", ns, err, want)
		}
	}
	bad("", `want "tenant/model"`)
	bad("nomodel", `want "tenant/model"`)
	bad("/m", "empty tenant")
	bad("t/", "empty model")
	bad("t/#s", "empty model")
	bad("t/m#", "empty salt")
	bad("t t/m", "not one of")
	bad("t/m m", "not printable")
	bad("t/m\x00", "not printable")
	bad(strings.Repeat("t", 65)+"/m", "tenant longer")
	bad("t/"+strings.Repeat("m", 257), "model longer")
	if Tenant("acme/llama#s") != "acme" {
		t.Fatal("Tenant")
	}
}

func TestChainKeysValidates(t *testing.T) {
	if _, err := ChainKeys("t/m", 8, nil); !errors.Is(err, ErrInvalidBlockSize) {
		t.Fatalf("block size 8: %v", err)
	}
	if _, err := ChainKeys("t/m", 2048, nil); !errors.Is(err, ErrInvalidBlockSize) {
		t.Fatalf("block size 2048: %v", err)
	}
	if _, err := ChainKeys("tm", 16, nil); !errors.Is(err, ErrInvalidNamespace) {
		t.Fatalf("namespace: %v", err)
	}
}

var sinkKey Key

func BenchmarkChainKeys(b *testing.B) {
	toks := make([]uint32, 512*256)
	for i := range toks {
		toks[i] = uint32(i)
	}
	b.SetBytes(int64(4 * len(toks)))
	b.ReportAllocs()
	for b.Loop() {
		keys, _ := ChainKeys("acme/llama", 256, toks)
		sinkKey = keys[len(keys)-1]
	}
}

func TestChainResume(t *testing.T) {
	tokens := make([]uint32, 3*16)
	for i := range tokens {
		tokens[i] = uint32(i * 7)
	}
	want, err := ChainKeys("t/m", 16, tokens)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewChain("t/m", 16)
	if err != nil {
		t.Fatal(err)
	}
	c.Resume(want[0])
	if got := c.Next(tokens[16:32]); got != want[1] {
		t.Fatalf("resumed after key 0: got %v, want %v", got, want[1])
	}
	c.Resume(Root("t/m", 16))
	if got := c.Next(tokens[:16]); got != want[0] {
		t.Fatalf("resumed at the root: got %v, want %v", got, want[0])
	}
}

// BenchmarkChainKeysPrompt keys a 2,048-token prompt in blocks of 16
// tokens, as a router does for each request with vLLM's block size.
func BenchmarkChainKeysPrompt(b *testing.B) {
	toks := make([]uint32, 2048)
	for i := range toks {
		toks[i] = uint32(i * 31)
	}
	b.SetBytes(int64(4 * len(toks)))
	b.ReportAllocs()
	for b.Loop() {
		keys, _ := ChainKeys("acme/llama", 16, toks)
		sinkKey = keys[len(keys)-1]
	}
}
