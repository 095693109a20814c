package server

import (
	"context"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

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
