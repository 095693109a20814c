package budget

import "errors"

var (
	// ErrExhausted: the bytes asked for did not become free within the
	// budget's wait. The caller answers "retry later".
	ErrExhausted = errors.New("budget: exhausted")
	// ErrTooLarge: the bytes asked for exceed the whole budget, so no wait
	// could ever admit them.
	ErrTooLarge = errors.New("budget: larger than the whole budget")
)
