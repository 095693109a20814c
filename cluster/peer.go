package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/yuebing/yuebing/internal/httperr"
)

// The peer client: every request one node makes of another's internal API
// (POST, signed with the cluster token) goes through these, so failures read
// the same everywhere: a node that cannot be reached is ErrUnreachable, an
// error answer comes back as the sentinel of its code, and no error carries
// an address, since it may end up in a public answer.

// send posts a JSON request to member m's internal API with client c and
// returns the answer when it is a 200. Failing to reach m, or m not
// answering within the client's header timeout, is ErrUnreachable; an error
// answer is the sentinel of its code. The errors name m, never its address.
func (n *Node) send(ctx context.Context, c *http.Client, m Member, path string, in any) (*http.Response, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return n.sendRaw(ctx, c, m, path, body)
}

func (n *Node) sendRaw(ctx context.Context, c *http.Client, m Member, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.Addrs.HTTP+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s has a bad address", ErrUnreachable, m.Name)
	}
	n.sign(req, body)
	resp, err := c.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
			return nil, cerr
		}
		return nil, fmt.Errorf("%w: %s", ErrUnreachable, m.Name)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, answerError(resp, m.Name)
	}
	return resp, nil
}

// call is send with a JSON answer decoded into out, or discarded when out
// is nil.
func (n *Node) call(ctx context.Context, c *http.Client, m Member, path string, in, out any) error {
	resp, err := n.send(ctx, c, m, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSON))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("%w: %s: %s: decoding the answer: %v", ErrUnreachable, m.Name, path, err)
	}
	return nil
}

// answerError turns an error answer of the internal API into the sentinel
// of its code.
func answerError(resp *http.Response, from string) error {
	var b httperr.Body
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&b)
	if sentinel := errorTable.Err(b.Error.Code); sentinel != nil {
		return fmt.Errorf("%w (from %s: %s)", sentinel, from, b.Error.Message)
	}
	return fmt.Errorf("%w: %s answered %s", ErrUnreachable, from, resp.Status)
}

// broadcast posts in to path on every other member at once with the fast
// client and hands each member's answer, decoded into a new Out, or its
// error to each. The calls of each are serialized, so each may update the
// caller's variables without a lock. It returns when every member has
// answered or failed; ctx bounds the wait.
func broadcast[Out any](ctx context.Context, n *Node, path string, in any, each func(m Member, out *Out, err error)) {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, m := range n.Members() {
		if m.ID == n.id {
			continue
		}
		wg.Go(func() {
			var out Out
			err := n.call(ctx, n.fast, m, path, in, &out)
			mu.Lock()
			defer mu.Unlock()
			each(m, &out, err)
		})
	}
	wg.Wait()
}
