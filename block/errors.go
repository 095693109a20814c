package block

var (
	// ErrInvalidKey reports a malformed key in its text form.
	ErrInvalidKey error = NewSentinel("block.ErrInvalidKey", "block: invalid key")
	// ErrInvalidNamespace reports a namespace that is not "tenant/model[#salt]".
	ErrInvalidNamespace error = NewSentinel("block.ErrInvalidNamespace", "block: invalid namespace")
	// ErrInvalidBlockSize reports a block size outside [MinBlockSize, MaxBlockSize].
	ErrInvalidBlockSize error = NewSentinel("block.ErrInvalidBlockSize", "block: invalid block size")
	// ErrInvalidToken reports a token that is not an integer in [0, 2^32).
	ErrInvalidToken error = NewSentinel("block.ErrInvalidToken", "block: invalid token")
	// ErrCorrupt reports a header or payload whose checksum does not match.
	ErrCorrupt error = NewSentinel("block.ErrCorrupt", "block: corrupt block")
)

// Sentinel is a sentinel error that names itself: its kind is its Go name
// ("tier.ErrNotFound"). The table that maps errors to HTTP answers
// (internal/httperr) matches kinds, so it needs not import the packages
// below the HTTP surfaces that define the errors; this package's and tier's
// are Sentinels. Compare them with errors.Is as any sentinel.
type Sentinel struct{ kind, msg string }

// NewSentinel returns a sentinel of kind with message msg.
func NewSentinel(kind, msg string) *Sentinel { return &Sentinel{kind: kind, msg: msg} }

func (e *Sentinel) Error() string { return e.msg }

// Kind returns the sentinel's Go name.
func (e *Sentinel) Kind() string { return e.kind }
