package staging

import (
	"net"

	"github.com/yuebing/yuebing/internal/rawsock"
)

var newline = []byte{'\n'}

// answerWriter writes a session's answer lines: the answer and its newline
// in one raw non-blocking writev (internal/rawsock), so no answer enters
// the runtime as a blocking system call, whose entersyscall wakes sysmon
// when every processor was idle, and no answer is copied into a buffer
// first. A full socket (a client that does not read its answers) parks the
// goroutine in the poller, where Close reaches it.
type answerWriter struct {
	raw  *rawsock.Writer
	c    net.Conn
	bufs [2][]byte
}

func newAnswerWriter(c net.Conn) *answerWriter {
	return &answerWriter{raw: rawsock.NewWriter(c), c: c}
}

// write writes line and a newline, whole unless it fails.
func (w *answerWriter) write(line []byte) error {
	if w.raw == nil {
		_, err := w.c.Write(append(line, '\n'))
		return err
	}
	w.bufs = [2][]byte{line, newline}
	_, err := w.raw.Writev(w.bufs[:])
	w.bufs = [2][]byte{}
	return err
}
