package block

import "errors"

var (
	// ErrInvalidKey reports a malformed key in its text form.
	ErrInvalidKey = errors.New("block: invalid key")
	// ErrInvalidNamespace reports a namespace that is not "tenant/model[#salt]".
	ErrInvalidNamespace = errors.New("block: invalid namespace")
	// ErrInvalidBlockSize reports a block size outside [MinBlockSize, MaxBlockSize].
	ErrInvalidBlockSize = errors.New("block: invalid block size")
	// ErrInvalidToken reports a token that is not an integer in [0, 2^32).
	ErrInvalidToken = errors.New("block: invalid token")
	// ErrCorrupt reports a header or payload whose checksum does not match.
	ErrCorrupt = errors.New("block: corrupt block")
)
