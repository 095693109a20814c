package soak

import (
	"errors"
	"fmt"
	"time"

	"github.com/yuebing/yuebing/bench"
)

// S3Flags are the --s3* settings of `yuebing bench soak` as written on its
// command line: S3Options with the sizes still as text and --no-s3-kill.
type S3Flags struct {
	// Local is --s3: run versitygw (Versitygw, --versitygw) on 127.0.0.1.
	Local     bool
	Versitygw string
	// Endpoint, Bucket, Namespace and CredentialsFile are --s3-endpoint,
	// --s3-bucket, --s3-namespace and --s3-credentials-file.
	Endpoint, Bucket, Namespace, CredentialsFile string
	// Capacity and SegmentSize are byte sizes ("1GiB"); empty: the
	// default.
	Capacity, SegmentSize string
	// KillAt and DownFor are --s3-kill-at and --s3-down-for (0: the
	// default); NoKill never kills the server.
	KillAt, DownFor time.Duration
	NoKill          bool
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the S3 options f sets.
func (f *S3Flags) Parse() (S3Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := S3Options{Local: f.Local, Versitygw: f.Versitygw, Endpoint: f.Endpoint, Bucket: f.Bucket,
		Namespace: f.Namespace, CredentialsFile: f.CredentialsFile, KillAt: f.KillAt, DownFor: f.DownFor}
	errs = append(errs, bench.ParseSizes(
		bench.SizeFlag{Name: "s3-capacity", Text: f.Capacity, Set: func(n int64) { o.Capacity = n }, Optional: true},
		bench.SizeFlag{Name: "s3-segment-size", Text: f.SegmentSize, Set: func(n int64) { o.SegmentSize = n }, Optional: true},
	)...)
	if !o.Enabled() {
		if f.Namespace != "" || f.CredentialsFile != "" || f.Capacity != "" || f.SegmentSize != "" || f.KillAt != 0 || f.DownFor != 0 || f.NoKill {
			bad("--s3-*: want --s3, or --s3-endpoint and --s3-bucket, to give the nodes an S3 tier")
		}
		return o, errors.Join(errs...)
	}
	if f.Local && (f.Endpoint != "" || f.Bucket != "") {
		bad("--s3 runs a local versitygw: leave out --s3-endpoint and --s3-bucket (or --s3)")
	}
	if !f.Local && (f.Endpoint == "" || f.Bucket == "") {
		bad("--s3-endpoint and --s3-bucket go together")
	}
	if !f.Local && (f.KillAt != 0 || f.DownFor != 0 || f.NoKill) {
		bad("--s3-kill-at, --s3-down-for and --no-s3-kill are for --s3: an external bucket is never killed")
	}
	if f.KillAt < 0 || f.DownFor < 0 {
		bad("--s3-kill-at %s and --s3-down-for %s: want > 0 (or --no-s3-kill)", f.KillAt, f.DownFor)
	}
	if f.NoKill {
		o.KillAt = -1
	}
	return o, errors.Join(errs...)
}
