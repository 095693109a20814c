package enginesim

import (
	"container/list"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/block"
)

// pool is the engine's paged KV pool with its prefix cache (vLLM's automatic
// prefix caching): one page per block, full blocks of finished prefills
// stay cached by chained key until their page is needed; the least recently
// used unreferenced block goes first, and goes to the evict hook first (the
// demotion to yuebing). Only the engine loop touches it.
type pool struct {
	dev     adapter.Device
	cache   bool
	entries map[block.Key]*entry
	lru     *list.List // unreferenced cached entries, least recent at the front
	evict   func(k block.Key, p adapter.Page)
	// dropped, if set, hears of every cached block the pool evicts.
	dropped func(k block.Key)
	free    int
}

type entry struct {
	key  block.Key
	page adapter.Page
	refs int
	elem *list.Element
	// saved says yuebing has the block (or nothing below exists), so
	// eviction just drops it.
	saved bool
}

func newPool(dev adapter.Device, cache bool, evict func(block.Key, adapter.Page)) *pool {
	return &pool{dev: dev, cache: cache, entries: map[block.Key]*entry{}, lru: list.New(), evict: evict, free: dev.Pages()}
}

// match returns the pages of the longest cached prefix of keys, referenced.
func (p *pool) match(keys []block.Key) []adapter.Page {
	if !p.cache {
		return nil
	}
	var pages []adapter.Page
	for _, k := range keys {
		e, ok := p.entries[k]
		if !ok {
			break
		}
		p.ref(e)
		pages = append(pages, e.page)
	}
	return pages
}

func (p *pool) ref(e *entry) {
	if e.refs == 0 && e.elem != nil {
		p.lru.Remove(e.elem)
		e.elem = nil
	}
	e.refs++
}

// alloc returns n pages, evicting cached blocks as needed; nil when even an
// empty cache leaves too few.
func (p *pool) alloc(n int) []adapter.Page {
	for p.free < n && p.lru.Len() > 0 {
		e := p.lru.Remove(p.lru.Front()).(*entry)
		delete(p.entries, e.key)
		if p.dropped != nil {
			p.dropped(e.key)
		}
		if p.evict != nil && !e.saved {
			p.evict(e.key, e.page)
		}
		p.dev.Free(e.page)
		p.free++
	}
	if p.free < n {
		return nil
	}
	pages, err := p.dev.Alloc(n)
	if err != nil {
		// The count above mirrors the device's: a failure here is a bug.
		panic("BUG: enginesim: pool and device disagree: " + err.Error())
	}
	p.free -= n
	return pages
}

// insert makes page the cached copy of key, referenced once by the caller.
// It reports false when the key is cached already (the caller keeps its page
// private and frees it on release).
func (p *pool) insert(k block.Key, page adapter.Page, saved bool) bool {
	if !p.cache {
		return false
	}
	if _, ok := p.entries[k]; ok {
		return false
	}
	p.entries[k] = &entry{key: k, page: page, refs: 1, saved: saved}
	return true
}

// release drops a reference to a cached key's page.
func (p *pool) release(k block.Key) {
	e, ok := p.entries[k]
	if !ok {
		panic("BUG: enginesim: releasing an uncached block")
	}
	e.refs--
	if e.refs == 0 {
		e.elem = p.lru.PushBack(e)
	}
}

// freePage returns a private page.
func (p *pool) freePage(page adapter.Page) {
	p.dev.Free(page)
	p.free++
}
