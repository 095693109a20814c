package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress draws a one-line progress bar on a terminal. When the output is
// not a terminal (CI logs, pipes) it prints nothing until Done, so logs do not
// fill with carriage returns. It is safe for concurrent use.
type Progress struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	label  string
	total  int64
	done   int64
	start  time.Time
	drawn  time.Time
	closed bool
}

// NewProgress starts a bar for total units of work, drawn on stderr. A total
// of 0 means unknown; the bar then shows a count.
func NewProgress(label string, total int64) *Progress {
	return newProgress(os.Stderr, isTerminal(os.Stderr), label, total)
}

func newProgress(w io.Writer, tty bool, label string, total int64) *Progress {
	return &Progress{w: w, tty: tty, label: label, total: total, start: time.Now()}
}

// Add records n more units done.
func (p *Progress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if p.tty && !p.closed && time.Since(p.drawn) > 100*time.Millisecond {
		p.drawLocked()
	}
}

// Done finishes the bar with a final line.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.tty {
		p.drawLocked()
		fmt.Fprintln(p.w)
	}
}

func (p *Progress) drawLocked() {
	p.drawn = time.Now()
	el := time.Since(p.start).Round(100 * time.Millisecond)
	if p.total <= 0 {
		fmt.Fprintf(p.w, "\r%s %d %s", p.label, p.done, el)
		return
	}
	const width = 30
	frac := min(float64(p.done)/float64(p.total), 1)
	n := int(frac * width)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %s", p.label, strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*frac, el)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
