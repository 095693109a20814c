package server

import (
	"errors"
	"fmt"
	"io"

	"github.com/yuebing/yuebing/block/frame"
)

// FramesContentType is the media type of framed bodies (package frame).
const FramesContentType = frame.ContentType

// frameReader is a frame.Reader whose errors are the server's: a malformed
// body wraps ErrBadRequest, a frame over the limit ErrTooLarge.
type frameReader struct{ r *frame.Reader }

func newFrameReader(r io.Reader, allowedFlags uint32, maxLength int64) *frameReader {
	return &frameReader{frame.NewReader(r, allowedFlags, maxLength)}
}

// Next returns the next frame header, io.EOF at the clean end of the body.
func (f *frameReader) Next() (frame.Header, error) {
	h, err := f.r.Next()
	return h, frameErr(err)
}

// Data returns a reader of the current frame's data.
func (f *frameReader) Data() io.Reader { return frameData{f.r.Data()} }

type frameData struct{ r io.Reader }

func (d frameData) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	return n, frameErr(err)
}

func frameErr(err error) error {
	switch {
	case errors.Is(err, frame.ErrMalformed):
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	case errors.Is(err, frame.ErrTooLarge):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return err
}
