package s3

import "errors"

var (
	// ErrFormat: a segment object's trailer or footer is not one this
	// package wrote (bad magic, checksum, bounds). The object is skipped.
	ErrFormat = errors.New("s3: malformed segment object")
	// ErrConfig: the options are invalid; the message names the setting.
	ErrConfig = errors.New("s3: invalid configuration")
	// ErrBucket: the bucket cannot be used at start (missing, wrong
	// credentials, endpoint unreachable); the message names the setting.
	ErrBucket = errors.New("s3: bucket not usable")
)
