package server

import (
	"context"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/server/resp"
	"github.com/yuebing/yuebing/tier"
)

// pinNamespace is the namespace a stored block's hard pin is charged to:
// the one the API's record names, or, for a Redis key's block, the one the
// RESP front end's record names. A restart or a replica's arrival charges
// pins by it, so RESP pins count against the quota as HTTP pins do.
func pinNamespace(meta []byte) (string, bool) {
	if m, ok := decodeMeta(meta); ok {
		return m.Namespace, true
	}
	return resp.RecordNamespace(meta)
}

// retainRESP is the RESP front end's resp.Options.Retain: it gives the
// block key, holding a value of namespace ns, class until until, a hard
// pin charged against ns's retention.pinned_quota as an HTTP put's is
// (an error wrapping ErrPinQuota over it). RESP blocks carry the front
// end's own records rather than the API's meta, and the front end has
// checked its caller, so RetainBlock's meta check does not apply here.
func (a *API) retainRESP(ctx context.Context, ns string, key block.Key, size int64, class tier.Retention, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := retentionRequest{class: class, until: until, set: true}
	t := target{key: key, ns: ns}
	undo, err := a.chargePin(t, size, r)
	if err != nil {
		return err
	}
	if err := a.applyRetention(t, r); err != nil {
		undo()
		return err
	}
	a.pins.settle(key)
	return nil
}
