package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/block/frame"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/server/staging"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/policy"
	"github.com/yuebing/yuebing/tier/ssd"
)

// admissionNode is an API over a 1 MiB DRAM tier and an SSD tier with the
// given admission policy, served on a loopback listener.
func admissionNode(t *testing.T, admission string) (*tier.Hierarchy, *httptest.Server) {
	t.Helper()
	dir := t.TempDir()
	d, err := dram.New(dram.Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: filepath.Join(dir, "ssd"), Capacity: 64 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var hopts tier.HierarchyOptions
	AdmissionConfig{Admission: admission}.apply(&hopts)
	store, err := tier.NewHierarchy([]tier.Tier{d, s}, hopts)
	if err != nil {
		t.Fatal(err)
	}
	// Shared-memory sessions too, as a node on the client's host has them.
	var api *API
	handle := func(ctx context.Context, sess *staging.Session, line []byte) []byte {
		return api.ServeShm(ctx, sess, line)
	}
	st, err := newStaging(ShmConfig{Listen: "auto", MaxSessionBytes: 8 << 20, MaxBytes: 16 << 20, MaxSessions: 4}, nil, handle, nil)
	if err != nil {
		t.Fatal(err)
	}
	go st.Serve()
	api, err = NewAPI(APIOptions{Store: store, ContextsFile: filepath.Join(dir, "contexts.json"), Staging: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		srv.Close()
		st.Close()
		api.Close()
		store.Close()
	})
	return store, srv
}

// batchPut posts keys as one framed batch put with the given headers.
func batchPut(t *testing.T, url string, keys []block.Key, data []byte, hdr map[string]string) *http.Response {
	t.Helper()
	var body bytes.Buffer
	body.WriteString(frame.Magic)
	for _, k := range keys {
		var h [frame.HeaderSize]byte
		frame.Header{Key: k, Length: uint64(len(data))}.Encode(&h)
		body.Write(h[:])
		body.Write(data)
	}
	req, err := http.NewRequest(http.MethodPost, url+"/v1/batch/put", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", frame.ContentType)
	req.Header.Set("X-Yuebing-Namespace", nsAlpha)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// evictChain puts unrelated blocks through the DRAM tier until the chain
// has left it, then returns where each chain block is held once the
// demotions settle: "ssd", or "" for no tier.
func evictChain(t *testing.T, store *tier.Hierarchy, srv *httptest.Server, keys []block.Key) []string {
	t.Helper()
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	filler := chain(t, nsAlpha, 40, 99)
	data := payload(3, 64<<10)
	for _, k := range filler { // 2.5 MiB through a 1 MiB tier
		if _, err := c.Put(t.Context(), nsAlpha, k, data); err != nil {
			t.Fatal(err)
		}
	}
	var where []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		where = where[:0]
		settled := true
		for _, k := range keys {
			e, ok := store.Lookup(k)
			switch {
			case !ok || e.Tiers == 0:
				where = append(where, "")
			case e.Tiers.Has(0):
				where = append(where, "dram")
				settled = false
			default:
				where = append(where, "ssd")
			}
		}
		if settled || time.Now().After(deadline) {
			return where
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAdmissionChainFromHeaders: a node with ssd.admission chain learns a
// batch put's chain from X-Yuebing-Chain and keeps the chain's tail off
// SSD while its interior blocks are demoted; without the header every
// block is demoted, as under all.
func TestAdmissionChainFromHeaders(t *testing.T) {
	data := payload(1, 64<<10)

	store, srv := admissionNode(t, policy.AdmitChain)
	keys := chain(t, nsAlpha, 4, 1)
	if res := batchPut(t, srv.URL, keys, data, map[string]string{HeaderChain: "1"}); res.StatusCode != http.StatusOK {
		t.Fatalf("chained batch put: %s", res.Status)
	}
	where := evictChain(t, store, srv, keys)
	if want := []string{"ssd", "ssd", "ssd", ""}; fmt.Sprint(where) != fmt.Sprint(want) {
		t.Fatalf("chain blocks after eviction held in %q; want %q (the tail refused)", where, want)
	}
	if n := store.AdmissionRefused(); n < 1 {
		t.Fatalf("AdmissionRefused = %d; want the tail counted", n)
	}

	store, srv = admissionNode(t, policy.AdmitChain)
	keys = chain(t, nsAlpha, 4, 2)
	if res := batchPut(t, srv.URL, keys, data, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("plain batch put: %s", res.Status)
	}
	where = evictChain(t, store, srv, keys)
	if want := []string{"ssd", "ssd", "ssd", "ssd"}; fmt.Sprint(where) != fmt.Sprint(want) {
		t.Fatalf("blocks put without chain headers held in %q; want all on SSD", where)
	}
	if n := store.AdmissionRefused(); n != 0 {
		t.Fatalf("AdmissionRefused = %d without chain headers; want 0", n)
	}
}

// chainItems interleaves two chains in one batch, as the adapter's save
// batches mix several requests, each item naming its parent.
func chainItems(t *testing.T, data []byte, seeds ...uint32) (items []client.Item, tails []bool) {
	t.Helper()
	var chains [][]block.Key
	for _, s := range seeds {
		chains = append(chains, chain(t, nsAlpha, 3, s))
	}
	for i := range 3 {
		for _, ks := range chains {
			it := client.Item{Key: ks[i], Data: data}
			if i > 0 {
				it.Parent, it.HasParent = ks[i-1], true
			}
			items = append(items, it)
			tails = append(tails, i == 2)
		}
	}
	return items, tails
}

// TestAdmissionChainFromFrameParents: a multi-put whose frames name their
// own parents, over HTTP and through a shared-memory session (segment and
// registered region), lets a node with ssd.admission chain tell two chains
// mixed in one batch apart: both chains' interior blocks are demoted at
// DRAM eviction and both tails refused.
func TestAdmissionChainFromFrameParents(t *testing.T) {
	data := payload(1, 64<<10)
	for _, path := range []string{"http", "shm", "shm-region"} {
		t.Run(path, func(t *testing.T) {
			store, srv := admissionNode(t, policy.AdmitChain)
			c, err := client.New(srv.URL, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			items, tails := chainItems(t, data, 11, 12)
			var res []client.ItemResult
			var st *client.Staging
			if path != "http" {
				var serr error
				if st, serr = c.OpenStaging(t.Context(), 1<<20); serr != nil {
					t.Fatal(serr)
				}
				defer st.Close()
			}
			switch path {
			case "http":
				res, err = c.PutBatch(t.Context(), nsAlpha, items)
			case "shm":
				res, err = st.PutBatch(t.Context(), nsAlpha, items)
			case "shm-region":
				region, rerr := rdma.NewSharedMemory("admission-test", len(items)*len(data))
				if rerr != nil {
					t.Fatal(rerr)
				}
				defer region.Close()
				ris := make([]client.RegionItem, len(items))
				for i, it := range items {
					off := int64(i * len(data))
					copy(region.Bytes()[off:], it.Data)
					ris[i] = client.RegionItem{Key: it.Key, Region: region, Offset: off, Length: int64(len(data)), Parent: it.Parent, HasParent: it.HasParent}
				}
				res, err = st.PutFrom(t.Context(), nsAlpha, ris)
			}
			if err != nil || len(res) != len(items) {
				t.Fatalf("put: %d results, %v", len(res), err)
			}
			keys := make([]block.Key, len(items))
			var want []string
			for i, it := range items {
				keys[i] = it.Key
				if tails[i] {
					want = append(want, "")
				} else {
					want = append(want, "ssd")
				}
			}
			if where := evictChain(t, store, srv, keys); fmt.Sprint(where) != fmt.Sprint(want) {
				t.Fatalf("blocks after eviction held in %q; want %q (both tails refused)", where, want)
			}
		})
	}
}

// TestAdmissionParentBad: a shared-memory put item whose parent is not a
// key is refused naming it, and nothing of the request is stored; a frame
// whose body ends inside its parent key is 400 and not stored.
func TestAdmissionParentBad(t *testing.T) {
	n := startNode(t, nodeOpts{staging: true})
	sess, mem := shmSession(t, n, "", 1<<16)
	copy(mem, "some kv")
	keys := chain(t, nsAlpha, 2, 21)
	for _, parent := range []string{"abc", strings.Repeat("0", 66), strings.Repeat("G", 64)} {
		status, _, body := shmCall(t, n, "", "/v1/shm/"+sess+"/put", map[string]any{"namespace": nsAlpha, "items": []map[string]any{
			{"key": keys[0].String(), "offset": 0, "length": 7},
			{"key": keys[1].String(), "offset": 0, "length": 7, "parent": parent},
		}})
		if status != http.StatusBadRequest || !strings.Contains(body, "items[1].parent") {
			t.Errorf("shm put with parent %q: %d %s; want 400 naming items[1].parent", parent, status, body)
		}
	}
	for _, k := range keys {
		if _, ok := n.store.Lookup(k); ok {
			t.Errorf("%s stored by a refused shm put", k)
		}
	}

	var body bytes.Buffer
	body.WriteString(frame.Magic)
	h := frame.Header{Key: keys[0], Flags: frame.FlagParent, Length: 7, Parent: keys[1]}
	var hb [frame.HeaderSize]byte
	h.Encode(&hb)
	body.Write(hb[:])
	body.Write(keys[1][:10]) // cut inside the parent
	r := do(t, n, http.MethodPost, "/v1/batch/put", "", map[string]string{"Content-Type": frame.ContentType, HeaderNamespace: nsAlpha}, body.Bytes())
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "parent") {
		t.Errorf("frame cut inside its parent: %d %s; want 400 naming the parent", r.status, r.body)
	}
	if _, ok := n.store.Lookup(keys[0]); ok {
		t.Errorf("%s stored by a frame cut inside its parent", keys[0])
	}
}

// TestAdmissionHeadersBad: a malformed parent key or chain flag is 400
// naming the header, and nothing is stored.
func TestAdmissionHeadersBad(t *testing.T) {
	store, srv := admissionNode(t, policy.AdmitChain)
	keys := chain(t, nsAlpha, 2, 5)
	data := payload(2, 1000)
	for _, hdr := range []map[string]string{
		{HeaderParent: "not-a-key"},
		{HeaderChain: "yes"},
	} {
		res := batchPut(t, srv.URL, keys, data, hdr)
		msg, _ := io.ReadAll(res.Body)
		var name string
		for k := range hdr {
			name = k
		}
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), name) {
			t.Errorf("batch put with %v: %s %s; want 400 naming %s", hdr, res.Status, msg, name)
		}
	}
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/blocks/"+keys[0].String(), bytes.NewReader(data))
	req.Header.Set("X-Yuebing-Namespace", nsAlpha)
	req.Header.Set(HeaderParent, "zz")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), HeaderParent) {
		t.Errorf("put with a bad parent: %s %s; want 400 naming %s", res.Status, msg, HeaderParent)
	}
	// A good parent on a single put is accepted.
	req, _ = http.NewRequest(http.MethodPut, srv.URL+"/v1/blocks/"+keys[1].String(), bytes.NewReader(data))
	req.Header.Set("X-Yuebing-Namespace", nsAlpha)
	req.Header.Set(HeaderParent, keys[0].String())
	if res, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated {
		t.Errorf("put with a parent: %s", res.Status)
	}
	for _, k := range keys[:1] {
		if _, ok := store.Lookup(k); ok {
			t.Errorf("%s stored by a refused put", k)
		}
	}
}

// TestAdmissionConfig: ssd.admission and its ghost size are read from the
// environment and checked at start, a bad value named.
func TestAdmissionConfig(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	if _, err := c.ApplyEnv([]string{"YUEBING_SSD_ADMISSION=learned", "YUEBING_SSD_ADMISSION_GHOST=1000"}); err != nil {
		t.Fatal(err)
	}
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var o tier.HierarchyOptions
	c.SSD.AdmissionConfig.apply(&o)
	if o.Admission != policy.AdmitLearned || o.AdmissionGhost != 1000 {
		t.Fatalf("hierarchy options %q/%d; want learned/1000", o.Admission, o.AdmissionGhost)
	}
	c.SSD.Admission, c.SSD.AdmissionGhost = "lru", -1
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "ssd.admission: \"lru\"") || !strings.Contains(err.Error(), "ssd.admission_ghost") {
		t.Fatalf("Validate = %v; want both settings named", err)
	}
}
