package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/yuebing/yuebing/block"
)

// Options configure a Client.
type Options struct {
	// Token is sent as "Authorization: Bearer TOKEN" when set.
	Token string
	// HTTPClient sends the requests. Default: a client whose transport
	// keeps up to 64 idle connections to the server, for reuse across
	// concurrent calls.
	HTTPClient *http.Client
}

// Client calls one yuebing node. It is safe for concurrent use; calls reuse
// connections.
type Client struct {
	base  string
	hc    *http.Client
	token string
}

// Header names of the API.
const (
	headerNamespace = "X-Yuebing-Namespace"
	headerCRC       = "X-Yuebing-Crc32c"
	headerTier      = "X-Yuebing-Tier"
	headerSource    = "X-Yuebing-Source"
	headerReplicas  = "X-Yuebing-Replicas"
	headerSize      = "X-Yuebing-Size"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// New returns a client of the node at baseURL ("http://127.0.0.1:8080";
// a bare host:port means http).
func New(baseURL string, opts Options) (*Client, error) {
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("client: base URL %q: want http://host:port", baseURL)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			// Large blocks: bigger socket buffers in user space cut
			// syscalls per block.
			WriteBufferSize: 256 << 10,
			ReadBufferSize:  256 << 10,
		}}
	}
	return &Client{base: strings.TrimRight(u.String(), "/"), hc: hc, token: opts.Token}, nil
}

func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends req and returns the response if its status is one of ok; any
// other answer is turned into an *Error and the body closed.
func (c *Client) do(req *http.Request, ok ...int) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", req.Method, req.URL.Path, err)
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer drain(resp.Body)
	return nil, decodeError(resp)
}

func decodeError(resp *http.Response) error {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err := json.Unmarshal(data, &body); err != nil || body.Error.Code == "" {
		return &Error{StatusCode: resp.StatusCode, Code: "unknown", Message: strings.TrimSpace(string(data))}
	}
	return &Error{StatusCode: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message}
}

// drain reads what is left of a body (up to a bound) and closes it, so the
// connection can be reused.
func drain(b io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(b, 256<<10))
	b.Close()
}

// doJSON sends in (if not nil) as JSON and decodes the answer into out.
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any, ok ...int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("client: encoding request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.do(req, ok...)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: decoding %s %s: %v", ErrProtocol, method, path, err)
	}
	return nil
}

// Keys returns the chained keys of tokens in namespace, computed by the
// server (block.ChainKeys computes the same keys locally).
func (c *Client) Keys(ctx context.Context, namespace string, blockSize int, tokens []uint32) ([]block.Key, error) {
	var out struct {
		Keys []block.Key `json:"keys"`
	}
	in := map[string]any{"namespace": namespace, "block_size": blockSize, "tokens": tokens}
	if tokens == nil {
		in["tokens"] = []uint32{}
	}
	err := c.doJSON(ctx, http.MethodPost, "/v1/keys", in, &out, http.StatusOK)
	return out.Keys, err
}

// PutResult says what a put did.
type PutResult struct {
	Key block.Key `json:"key"`
	// Created is false when the block was already stored (and not
	// rewritten).
	Created bool   `json:"created"`
	Tier    string `json:"tier"`
	Size    int64  `json:"size"`
}

// PutOptions qualify a streaming put.
type PutOptions struct {
	// Checksum is the CRC-32C of the body, when HasChecksum is set. The
	// server verifies it before committing: a mismatch stores nothing and
	// fails with ErrChecksum.
	Checksum    uint32
	HasChecksum bool
	// Replicas asks a cluster for this many copies of the block on
	// different nodes (X-Yuebing-Replicas); 0 leaves the default, 1.
	Replicas int
}

// Checksum returns the CRC-32C (Castagnoli) of p, as the API uses it.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// Put stores data under a chained key of namespace, with its checksum.
func (c *Client) Put(ctx context.Context, namespace string, key block.Key, data []byte) (PutResult, error) {
	return c.PutStream(ctx, namespace, key, bytes.NewReader(data), int64(len(data)), PutOptions{Checksum: Checksum(data), HasChecksum: true})
}

// PutStream stores size bytes read from r under a chained key. r is
// streamed, never buffered whole.
func (c *Client) PutStream(ctx context.Context, namespace string, key block.Key, r io.Reader, size int64, opts PutOptions) (PutResult, error) {
	return c.put(ctx, "/v1/blocks/"+key.String(), namespace, r, size, opts)
}

// PutObject stores data under an opaque name of namespace, with its
// checksum.
func (c *Client) PutObject(ctx context.Context, namespace, name string, data []byte) (PutResult, error) {
	return c.put(ctx, objectPath(name), namespace, bytes.NewReader(data), int64(len(data)), PutOptions{Checksum: Checksum(data), HasChecksum: true})
}

func objectPath(name string) string {
	return "/v1/objects/" + (&url.URL{Path: name}).EscapedPath()
}

func (c *Client) put(ctx context.Context, path, namespace string, r io.Reader, size int64, opts PutOptions) (PutResult, error) {
	req, err := c.newRequest(ctx, http.MethodPut, path, r)
	if err != nil {
		return PutResult{}, err
	}
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(headerNamespace, namespace)
	if opts.HasChecksum {
		req.Header.Set(headerCRC, fmt.Sprintf("%08x", opts.Checksum))
	}
	if opts.Replicas > 0 {
		req.Header.Set(headerReplicas, strconv.Itoa(opts.Replicas))
	}
	resp, err := c.do(req, http.StatusCreated, http.StatusOK)
	if err != nil {
		return PutResult{}, err
	}
	defer drain(resp.Body)
	var out PutResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("%w: decoding put answer: %v", ErrProtocol, err)
	}
	return out, nil
}

// GetOptions qualify a read.
type GetOptions struct {
	// Namespace, when set, must be the one the block is recorded under;
	// otherwise the read fails with ErrNotFound.
	Namespace string
	// Offset and Length select a slice of the block (a Range request);
	// Length 0 means to the end.
	Offset, Length int64
}

// BlockInfo describes a stored block.
type BlockInfo struct {
	// Size of the whole block.
	Size int64
	// Checksum is the CRC-32C of the whole block, when HasChecksum is set.
	Checksum    uint32
	HasChecksum bool
	// Tier is where the server read the block from.
	Tier string
	// Namespace the block is recorded under (HEAD only).
	Namespace string
	// Source, in a cluster, names the node the block was read from.
	Source string
}

// Reader streams a block (or the requested slice of it). Close it.
type Reader struct {
	io.ReadCloser
	Info BlockInfo
	// Length is how many bytes this Reader delivers.
	Length int64
}

// Open starts reading a block stored under a chained key.
func (c *Client) Open(ctx context.Context, key block.Key, opts GetOptions) (*Reader, error) {
	return c.open(ctx, "/v1/blocks/"+key.String(), opts)
}

// OpenObject starts reading an object.
func (c *Client) OpenObject(ctx context.Context, namespace, name string, opts GetOptions) (*Reader, error) {
	opts.Namespace = namespace
	return c.open(ctx, objectPath(name), opts)
}

func (c *Client) open(ctx context.Context, path string, opts GetOptions) (*Reader, error) {
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if opts.Namespace != "" {
		req.Header.Set(headerNamespace, opts.Namespace)
	}
	if opts.Offset < 0 || opts.Length < 0 {
		return nil, fmt.Errorf("client: negative offset or length")
	}
	if opts.Offset > 0 || opts.Length > 0 {
		r := fmt.Sprintf("bytes=%d-", opts.Offset)
		if opts.Length > 0 {
			r += strconv.FormatInt(opts.Offset+opts.Length-1, 10)
		}
		req.Header.Set("Range", r)
	}
	resp, err := c.do(req, http.StatusOK, http.StatusPartialContent)
	if err != nil {
		return nil, err
	}
	info, err := blockInfo(resp.Header)
	if err != nil {
		drain(resp.Body)
		return nil, err
	}
	return &Reader{ReadCloser: resp.Body, Info: info, Length: resp.ContentLength}, nil
}

func blockInfo(h http.Header) (BlockInfo, error) {
	info := BlockInfo{Tier: h.Get(headerTier), Namespace: h.Get(headerNamespace), Source: h.Get(headerSource), Size: -1}
	if s := h.Get(headerSize); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return info, fmt.Errorf("%w: %s %q", ErrProtocol, headerSize, s)
		}
		info.Size = n
	} else if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil {
		info.Size = n
	}
	if s := h.Get(headerCRC); s != "" {
		v, err := strconv.ParseUint(s, 16, 32)
		if err != nil {
			return info, fmt.Errorf("%w: %s %q", ErrProtocol, headerCRC, s)
		}
		info.Checksum, info.HasChecksum = uint32(v), true
	}
	return info, nil
}

// Get reads a whole block and verifies it against the checksum the server
// sent: bytes that do not match fail with ErrChecksum.
func (c *Client) Get(ctx context.Context, key block.Key, opts GetOptions) ([]byte, BlockInfo, error) {
	opts.Offset, opts.Length = 0, 0
	r, err := c.Open(ctx, key, opts)
	if err != nil {
		return nil, BlockInfo{}, err
	}
	return readAll(r)
}

// GetObject reads a whole object and verifies it, as Get.
func (c *Client) GetObject(ctx context.Context, namespace, name string) ([]byte, BlockInfo, error) {
	r, err := c.OpenObject(ctx, namespace, name, GetOptions{})
	if err != nil {
		return nil, BlockInfo{}, err
	}
	return readAll(r)
}

func readAll(r *Reader) ([]byte, BlockInfo, error) {
	defer r.Close()
	if r.Length < 0 {
		return nil, r.Info, fmt.Errorf("%w: block answer without a length", ErrProtocol)
	}
	buf := make([]byte, r.Length)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, r.Info, fmt.Errorf("client: reading block: %w", err)
	}
	if r.Info.HasChecksum {
		if got := Checksum(buf); got != r.Info.Checksum {
			return nil, r.Info, fmt.Errorf("%w: received crc32c %08x, server sent %08x", ErrChecksum, got, r.Info.Checksum)
		}
	}
	return buf, r.Info, nil
}

// Stat returns a block's size, checksum (when known) and tier without
// reading it. With a namespace, the block must be recorded under it.
func (c *Client) Stat(ctx context.Context, key block.Key, namespace string) (BlockInfo, error) {
	return c.stat(ctx, "/v1/blocks/"+key.String(), namespace)
}

// StatObject is Stat for an object.
func (c *Client) StatObject(ctx context.Context, namespace, name string) (BlockInfo, error) {
	return c.stat(ctx, objectPath(name), namespace)
}

func (c *Client) stat(ctx context.Context, path, namespace string) (BlockInfo, error) {
	req, err := c.newRequest(ctx, http.MethodHead, path, nil)
	if err != nil {
		return BlockInfo{}, err
	}
	if namespace != "" {
		req.Header.Set(headerNamespace, namespace)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return BlockInfo{}, fmt.Errorf("client: HEAD %s: %w", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// A HEAD answer has no body: the status is all there is.
		return BlockInfo{}, &Error{StatusCode: resp.StatusCode, Code: strings.ToLower(strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "_")), Message: "HEAD " + path}
	}
	return blockInfo(resp.Header)
}

// Delete removes a block. With a namespace, the block must be recorded
// under it.
func (c *Client) Delete(ctx context.Context, key block.Key, namespace string) error {
	return c.delete(ctx, "/v1/blocks/"+key.String(), namespace)
}

// DeleteObject removes an object.
func (c *Client) DeleteObject(ctx context.Context, namespace, name string) error {
	return c.delete(ctx, objectPath(name), namespace)
}

func (c *Client) delete(ctx context.Context, path, namespace string) error {
	req, err := c.newRequest(ctx, http.MethodDelete, path, nil)
	if err != nil {
		return err
	}
	if namespace != "" {
		req.Header.Set(headerNamespace, namespace)
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	drain(resp.Body)
	return nil
}

// Health returns nil if the node is up (/healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.doJSON(ctx, http.MethodGet, "/healthz", nil, nil, http.StatusOK)
}

// Metrics returns the node's Prometheus metrics in the text exposition
// format (/metrics).
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// Ready returns nil if the node takes traffic (/readyz); ErrUnavailable
// while it shuts down.
func (c *Client) Ready(ctx context.Context) error {
	return c.doJSON(ctx, http.MethodGet, "/readyz", nil, nil, http.StatusOK)
}
