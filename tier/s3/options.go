package s3

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/tier/policy"
)

// Options configure the S3 tier. Field names in errors are the YAML names
// of the server configuration's s3 section (s3.bucket, s3.endpoint, ...).
type Options struct {
	// Endpoint is the S3 server's host:port, or a URL whose scheme says
	// whether to use TLS (https://host). Required.
	Endpoint string `yaml:"endpoint"`
	// Bucket holds the segment objects. It must exist. Required.
	Bucket string `yaml:"bucket"`
	// Namespace prefixes every object name, so clusters can share a bucket;
	// nodes with the same bucket and namespace share their blocks. Default
	// "yuebing".
	Namespace string `yaml:"namespace"`
	// Region is sent with signed requests. Default "us-east-1".
	Region string `yaml:"region"`
	// AccessKeyID and SecretAccessKey sign requests. They are never logged
	// or printed; empty means anonymous requests.
	AccessKeyID     string `yaml:"-"`
	SecretAccessKey string `yaml:"-"`
	// CredentialsFile is a YAML file with access_key_id and
	// secret_access_key, read by LoadCredentials. Empty: the environment's
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	CredentialsFile string `yaml:"credentials_file"`
	// Capacity bounds the bytes of live blocks the tier keeps in the bucket
	// (dead bytes awaiting compaction are not counted). Required.
	Capacity bytesize.Size `yaml:"capacity"`
	// SegmentSize is the size at which the open segment is sealed and
	// uploaded as one object. Default 64 MiB: large enough that a PUT's cost
	// is spread over hundreds of blocks, small enough to buffer.
	SegmentSize bytesize.Size `yaml:"segment_size"`
	// FlushInterval seals a partly filled segment after this long, so a
	// quiet node does not keep blocks only in memory. Default 5s.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// MaxPending bounds the bytes sealed but not yet uploaded (plus the open
	// segment). A put past it waits for uploads, or fails with
	// tier.ErrUnavailable while the tier is degraded and WhenDegraded is
	// "drop". Default 4 * SegmentSize.
	MaxPending bytesize.Size `yaml:"max_pending"`
	// WhenDegraded says what a put does while the bucket is failing and the
	// pending bytes are full: "drop" (default) refuses it at once with
	// tier.ErrUnavailable, so a demotion is dropped; "wait" waits for the
	// bucket to recover until the put's context is done.
	WhenDegraded string `yaml:"when_degraded"`
	// CompactBelow is the live fraction under which an uploaded segment is
	// rewritten: its live blocks are copied into the open segment and the
	// object is deleted once they are uploaded. Default 0.5.
	CompactBelow float64 `yaml:"compact_below"`
	// RequestTimeout bounds each S3 request; a request past it counts as a
	// failure and degrades the tier. Default 10s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// ProbeInterval is how often a degraded tier checks the bucket to
	// recover. Default 1s.
	ProbeInterval time.Duration `yaml:"probe_interval"`
	// RefreshInterval is how often the tier lists the bucket for segments
	// other nodes sharing the namespace wrote (see Refresh). Default 10s;
	// negative: only when Refresh is called.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// Policy names the eviction policy (tier/policy). Default "lru".
	Policy string `yaml:"policy"`
	// DegradedOK starts the tier degraded instead of failing Open when the
	// bucket cannot be reached or read; it recovers by itself.
	DegradedOK bool `yaml:"degraded_ok"`
	// Logger receives state changes (degraded, recovered). Default discard.
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock for pins. Default time.Now.
	Now func() time.Time `yaml:"-"`
}

// Enabled says whether an S3 tier is configured at all.
func (o *Options) Enabled() bool { return o.Bucket != "" || o.Endpoint != "" }

// LoadCredentials fills AccessKeyID and SecretAccessKey from
// CredentialsFile or, without one, from the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY; getenv is os.Getenv in production). Errors name
// the file, never its contents.
func (o *Options) LoadCredentials(getenv func(string) string) error {
	if o.CredentialsFile == "" {
		if o.AccessKeyID == "" && o.SecretAccessKey == "" {
			o.AccessKeyID, o.SecretAccessKey = getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
		}
		return nil
	}
	b, err := os.ReadFile(o.CredentialsFile)
	if err != nil {
		return fmt.Errorf("%w: s3.credentials_file: %v", ErrConfig, err)
	}
	var c struct {
		AccessKeyID     string `yaml:"access_key_id"`
		SecretAccessKey string `yaml:"secret_access_key"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return fmt.Errorf("%w: s3.credentials_file %s: want YAML with access_key_id and secret_access_key", ErrConfig, o.CredentialsFile)
	}
	o.AccessKeyID, o.SecretAccessKey = c.AccessKeyID, c.SecretAccessKey
	return nil
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Namespace == "" {
		o.Namespace = "yuebing"
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = 64 << 20
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 5 * time.Second
	}
	if o.MaxPending == 0 {
		o.MaxPending = 4 * o.SegmentSize
	}
	if o.WhenDegraded == "" {
		o.WhenDegraded = "drop"
	}
	if o.CompactBelow == 0 {
		o.CompactBelow = 0.5
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Second
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = 10 * time.Second
	}
	if o.Policy == "" {
		o.Policy = "lru"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports every invalid setting at once, each by its name.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if o.Bucket == "" {
		bad("s3.bucket is required")
	}
	if o.Endpoint == "" {
		bad("s3.endpoint is required")
	} else if _, _, err := splitEndpoint(o.Endpoint); err != nil {
		bad("s3.endpoint %q: %v", o.Endpoint, err)
	}
	if strings.Contains(o.Namespace, "..") || strings.HasPrefix(o.Namespace, "/") || strings.HasSuffix(o.Namespace, "/") {
		bad("s3.namespace %q: want names separated by single slashes", o.Namespace)
	}
	if o.Capacity <= 0 {
		bad("s3.capacity must be positive, got %d", o.Capacity)
	}
	if o.SegmentSize <= 0 {
		bad("s3.segment_size must be positive, got %d", o.SegmentSize)
	}
	if o.MaxPending < o.SegmentSize {
		bad("s3.max_pending (%d) must be at least s3.segment_size (%d)", o.MaxPending, o.SegmentSize)
	}
	if o.WhenDegraded != "drop" && o.WhenDegraded != "wait" {
		bad("s3.when_degraded %q: want drop or wait", o.WhenDegraded)
	}
	if o.CompactBelow < 0 || o.CompactBelow >= 1 {
		bad("s3.compact_below %v: want a fraction in [0, 1)", o.CompactBelow)
	}
	if o.FlushInterval < 0 || o.RequestTimeout < 0 || o.ProbeInterval < 0 {
		bad("s3 intervals and timeouts must not be negative")
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		bad("s3 credentials: access key id and secret access key must be given together")
	}
	if _, err := policy.New[int](o.Policy, 1); err != nil {
		bad("s3.policy: %v", err)
	}
	return errors.Join(errs...)
}

// splitEndpoint returns host:port and whether to use TLS.
func splitEndpoint(ep string) (host string, secure bool, err error) {
	if !strings.Contains(ep, "://") {
		if strings.ContainsAny(ep, "/?#") {
			return "", false, errors.New("want host:port or a URL without a path")
		}
		return ep, false, nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", false, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", false, errors.New("want host:port or a URL without a path")
	}
	return u.Host, u.Scheme == "https", nil
}
