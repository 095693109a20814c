package bench

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// forceProgress draws bars even when stderr is not a terminal.
var forceProgress atomic.Bool

// ShowProgress makes every later bar draw on stderr even when it is not a
// terminal (yuebing bench --progress). By default bars draw only on a
// terminal, so CI logs and tests stay quiet.
func ShowProgress(on bool) { forceProgress.Store(on) }

// Progress is a one-line progress bar on stderr, drawn by
// github.com/schollz/progressbar. When stderr is not a terminal (CI logs,
// pipes) and ShowProgress is off, it draws nothing. It is safe for
// concurrent use; a nil *Progress does nothing.
type Progress struct {
	bar   *progressbar.ProgressBar
	done  atomic.Bool
	added atomic.Int64 // units recorded, drawn or not
}

// NewProgress starts a bar for total units of work, drawn on stderr. A total
// of 0 means unknown; the bar then shows a count.
func NewProgress(label string, total int64) *Progress {
	return NewProgressTo(os.Stderr, forceProgress.Load() || term.IsTerminal(int(os.Stderr.Fd())), label, total)
}

// NewProgressTo starts a bar drawn on w when show is set: NewProgress for a
// writer that is not stderr, as tests use.
func NewProgressTo(w io.Writer, show bool, label string, total int64) *Progress {
	if total <= 0 {
		total = -1 // the library's spinner with a count
	}
	return &Progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetVisibility(show),
		progressbar.OptionSetDescription(label),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		// Redraw at most ten times a second: benches tick far more often.
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() {
			if show {
				fmt.Fprintln(w)
			}
		}),
	)}
}

// Add records n more units done.
func (p *Progress) Add(n int64) {
	if p == nil || p.done.Load() {
		return
	}
	p.added.Add(n)
	_ = p.bar.Add64(n)
}

// Added returns the units recorded so far, drawn or not.
func (p *Progress) Added() int64 { return p.added.Load() }

// Done finishes the bar with a final line.
func (p *Progress) Done() {
	if p == nil || p.done.Swap(true) {
		return
	}
	_ = p.bar.Finish()
}
