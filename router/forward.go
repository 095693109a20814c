package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Serve places an OpenAI request and forwards it, writing the engine's
// answer to w: a streamed answer chunk by chunk as it comes (server-sent
// events pass through), any other read whole first. An engine that fails
// before anything reached the client is taken out of scheduling and the
// request placed once more elsewhere.
//
// Serve returns an error only when it wrote nothing, for the caller to
// answer with: ErrBadRequest, ErrModelNotFound, *Overloaded, ErrNoEngine
// or ErrUpstream.
//
// A failed attempt does not take its engine out: it has the engine probed
// at once, and the probe decides (a dead engine refuses the probe's
// connection and leaves the scheduler before the retry is placed; one that
// answers stays, the failure being the request's as likely as the
// engine's). The retry goes to another engine where one is in, whatever
// the probe found, and to the same one only when it is the last.
func (r *Router) Serve(ctx context.Context, kind Kind, body []byte, w http.ResponseWriter) error {
	var last error
	for attempt := range 2 {
		var (
			p   *Plan
			err error
		)
		if attempt == 0 {
			p, err = r.Place(ctx, kind, body)
		} else {
			r.m.retries.Inc()
			req := prev(last)
			p, err = r.Decide(ctx, req)
			if errors.Is(err, ErrNoEngine) && r.scheduled(req.Exclude[0]) {
				// The engine that failed is the only one left, and its
				// probe answered: it gets the retry.
				req.Exclude = nil
				p, err = r.Decide(ctx, req)
			}
		}
		if err != nil {
			if attempt > 0 && errors.Is(err, ErrNoEngine) {
				// The probe took the failed engine out and none is left:
				// an outage (503), not an engine's answer.
				return fmt.Errorf("%w (the last one failed: %v)", err, last)
			}
			if attempt > 0 && errors.Is(err, ErrOverloaded) {
				return fmt.Errorf("%w: %w (and %w)", ErrUpstream, last, err)
			}
			return err
		}
		wrote, err := r.forward(ctx, kind, body, p, w)
		r.Done(p)
		if err == nil || wrote || ctx.Err() != nil {
			if err != nil && ctx.Err() == nil {
				r.log.Warn("router: engine failed after the answer started; the client sees a cut stream", "err", err)
			}
			return nil
		}
		var ee *engineError
		if !errors.As(err, &ee) {
			return err
		}
		last = &failedAttempt{err: err, req: Prepared{Prompt: p.Prompt, Keys: p.Keys, Exclude: []string{ee.engine}, ns: p.ns}}
	}
	return fmt.Errorf("%w: %w", ErrUpstream, last)
}

// failedAttempt carries a failed attempt's prepared request to the retry,
// which need not parse, tokenize and key it again.
type failedAttempt struct {
	err error
	req Prepared
}

func (f *failedAttempt) Error() string { return f.err.Error() }
func (f *failedAttempt) Unwrap() error { return f.err }

func prev(err error) Prepared {
	var f *failedAttempt
	if errors.As(err, &f) {
		return f.req
	}
	panic("BUG: router: a retry without a failed attempt")
}

// engineError is an engine that failed a request: unreachable, a 5xx, or
// a cut answer.
type engineError struct {
	engine string
	err    error
}

func (e *engineError) Error() string { return "engine " + e.engine + ": " + e.err.Error() }
func (e *engineError) Unwrap() error { return e.err }

// forward runs a placed request and reports whether anything reached w.
func (r *Router) forward(ctx context.Context, kind Kind, body []byte, p *Plan, w http.ResponseWriter) (bool, error) {
	d := p.Decision
	target := d.Prefill
	if d.Decode != "" {
		// Disaggregated: the prefill engine computes the prompt's KV (and
		// saves it to the pool) generating one token; the decode engine
		// then runs the request, loading that KV.
		if err := r.prefillOnly(ctx, kind, body, d.Prefill); err != nil {
			return false, err
		}
		_ = r.d.PrefillDone(d.RequestID)
		target = d.Decode
	}
	e := r.engines[target]
	if e == nil {
		// The scheduler holds the router's engines only (Register).
		return false, fmt.Errorf("%w: the scheduler placed the request on %q, not one of the router's engines", ErrUpstream, target)
	}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+kind.Path(), bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	r.passHeaders(ctx, req)
	resp, err := r.opts.Client.Do(req)
	if err != nil {
		return false, r.failed(ctx, e.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return false, r.failed(ctx, e.ID, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg)))
	}
	if !p.Prompt.Stream || resp.StatusCode != http.StatusOK {
		// Read it whole: until the client has a byte, a failure can be
		// retried elsewhere.
		data, err := io.ReadAll(io.LimitReader(resp.Body, r.opts.MaxResponseBytes+1))
		if err != nil {
			return false, r.failed(ctx, e.ID, err)
		}
		if int64(len(data)) > r.opts.MaxResponseBytes {
			return false, fmt.Errorf("%w: engine %s answered more than %d bytes", ErrUpstream, e.ID, r.opts.MaxResponseBytes)
		}
		if d.Decode == "" {
			_ = r.d.PrefillDone(d.RequestID)
		}
		copyHeaders(w.Header(), resp.Header)
		annotate(w.Header(), e.ID, p, callerFrom(ctx).HideHits)
		w.WriteHeader(resp.StatusCode)
		_, err = w.Write(data)
		return true, err
	}
	// Streamed: hold the headers until the first chunk, so an engine that
	// dies before its first token is still retried.
	buf := make([]byte, 32<<10)
	n, err := readSome(resp.Body, buf)
	if n == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return false, r.failed(ctx, e.ID, err)
	}
	ttft := time.Since(start)
	if d.Decode == "" {
		_ = r.d.PrefillDone(d.RequestID)
	}
	r.m.observed.Observe(ttft.Seconds())
	if pred := d.Estimates.TTFT; pred > 0 {
		r.m.ttftRatio.Observe(ttft.Seconds() / pred.Seconds())
	}
	copyHeaders(w.Header(), resp.Header)
	annotate(w.Header(), e.ID, p, callerFrom(ctx).HideHits)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	for {
		if _, werr := w.Write(buf[:n]); werr != nil {
			return true, werr // the client left
		}
		if fl != nil {
			fl.Flush()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return true, nil
			}
			return true, r.failed(ctx, e.ID, err)
		}
		n, err = readSome(resp.Body, buf)
	}
}

// readSome reads at least one byte unless the reader fails or ends.
func readSome(rd io.Reader, buf []byte) (int, error) {
	for {
		n, err := rd.Read(buf)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// prefillOnly runs the prompt on a prefill engine for one token.
func (r *Router) prefillOnly(ctx context.Context, kind Kind, body []byte, id string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	m["max_tokens"] = json.RawMessage("1")
	delete(m, "max_completion_tokens")
	m["stream"] = json.RawMessage("false")
	pb, err := json.Marshal(m)
	if err != nil {
		return err
	}
	e := r.engines[id]
	if e == nil {
		return fmt.Errorf("%w: the scheduler placed the prefill on %q, not one of the router's engines", ErrUpstream, id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+kind.Path(), bytes.NewReader(pb))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	r.passHeaders(ctx, req)
	resp, err := r.opts.Client.Do(req)
	if err != nil {
		return r.failed(ctx, id, err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, r.opts.MaxResponseBytes))
	if resp.StatusCode >= 500 || err != nil {
		return r.failed(ctx, id, fmt.Errorf("prefill: status %d, %v", resp.StatusCode, err))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: prefill engine %s answered %d", ErrBadRequest, id, resp.StatusCode)
	}
	return nil
}

// failed records an engine's failure of a request, unless the client went
// away (then the engine is not to blame), and has the engine probed before
// the retry: the probe, not the request, decides whether it is down.
func (r *Router) failed(ctx context.Context, id string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.m.failures.WithLabelValues(id).Inc()
	if e := r.engines[id]; e != nil {
		r.probeSince(ctx, e, time.Now())
	}
	return &engineError{engine: id, err: err}
}

// hopHeaders are not forwarded (RFC 9110 section 7.6.1), nor is the
// length, which the router's own writer sets.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Content-Length": true,
}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopHeaders[k] {
			continue
		}
		dst[k] = append(dst[k][:0], vs...)
	}
}
