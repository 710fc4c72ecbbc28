package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// partSize is the multipart upload's part size: an RDB of unknown length
// is uploaded in parts of this size, one part buffered in memory at a time
// per shard. S3 allows at most 10 000 parts, so 16 MiB parts carry RDBs
// up to 156 GiB.
const partSize = 16 << 20

// storeMaxRetries is how often a Store's client retries a request (0:
// minio-go's default, 10); tests that expect errors lower it.
var storeMaxRetries = 0

// Errors a Store classifies its failures into (errors.Is).
var (
	// ErrAccessDenied: the store refused the credentials or the request.
	ErrAccessDenied = errors.New("access denied")
	// ErrNoSuchBucket: the bucket does not exist.
	ErrNoSuchBucket = errors.New("no such bucket")
	// ErrNoSuchKey: the object does not exist.
	ErrNoSuchKey = errors.New("no such object")
)

// Keys is an S3 access key pair; empty fields send anonymous requests.
type Keys struct {
	AccessKeyID     string
	SecretAccessKey string
}

// Store is one bucket of an S3-compatible object store.
type Store struct {
	client *minio.Client
	bucket string
}

// NewStore connects (lazily: no request is sent) to the bucket of spec
// with keys, trusting caPEM (a PEM bundle) for https endpoints when not
// empty. Errors: a malformed endpoint (one with a user, path, query or
// fragment included: only the host is used) or CA bundle. It applies no
// EndpointPolicy: callers check the endpoint before reading the keys.
func NewStore(spec *cachev1beta1.ObjectStoreSpec, keys Keys, caPEM []byte) (*Store, error) {
	u, err := url.Parse(strings.TrimSuffix(spec.Endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Path != "" {
		return nil, fmt.Errorf("object store endpoint %q is not an http(s)://host[:port] URL", spec.Endpoint)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("the object store CA bundle holds no PEM certificate")
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var creds *credentials.Credentials
	if keys.AccessKeyID != "" || keys.SecretAccessKey != "" {
		creds = credentials.NewStaticV4(keys.AccessKeyID, keys.SecretAccessKey, "")
	} else {
		creds = credentials.New(&credentials.Static{})
	}
	lookup := minio.BucketLookupAuto
	if spec.ForcePathStyle {
		lookup = minio.BucketLookupPath
	}
	region := spec.Region
	if region == "" {
		region = "us-east-1"
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds: creds, Secure: u.Scheme == "https", Transport: transport,
		Region: region, BucketLookup: lookup, MaxRetries: storeMaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("object store client for %s: %w", spec.Endpoint, err)
	}
	return &Store{client: c, bucket: spec.Bucket}, nil
}

// ManifestKey is the manifest's key under a backup path.
func ManifestKey(backupPath string) string { return backupPath + "/manifest.json" }

// ShardKey is shard i's RDB key under a backup path (i in manifest order).
func ShardKey(backupPath string, i int) string {
	return fmt.Sprintf("%s/shard-%d.rdb", backupPath, i)
}

// Check asks for the bucket. Errors: ErrNoSuchBucket, ErrAccessDenied, or
// the transport's (endpoint unreachable).
func (s *Store) Check(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.classify(err, "")
	}
	if !ok {
		return fmt.Errorf("bucket %s: %w", s.bucket, ErrNoSuchBucket)
	}
	return nil
}

// Uploaded is what PutStream wrote.
type Uploaded struct {
	Size   int64  // bytes
	SHA256 string // 64 lowercase hex characters
}

// PutStream uploads r to key as a multipart upload of partSize parts
// (r's length is not known in advance), computing the size and SHA-256
// of what was read on the way. An upload that fails is aborted, so no
// partial object is ever visible under key.
func (s *Store) PutStream(ctx context.Context, key string, r io.Reader) (Uploaded, error) {
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(r, h)}
	_, err := s.client.PutObject(ctx, s.bucket, key, cr, -1, minio.PutObjectOptions{
		PartSize: partSize, ContentType: "application/octet-stream",
	})
	if err != nil {
		return Uploaded{}, s.classify(err, key)
	}
	return Uploaded{Size: cr.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Put writes b to key in one request.
func (s *Store) Put(ctx context.Context, key string, b []byte, contentType string) error {
	_, err := s.client.PutObject(ctx, s.bucket, key, bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: contentType})
	return s.classify(err, key)
}

// Get opens key for reading. Errors: ErrNoSuchKey, ErrNoSuchBucket,
// ErrAccessDenied, the transport's.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if _, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{}); err != nil {
		return nil, s.classify(err, key)
	}
	o, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.classify(err, key)
	}
	return o, nil
}

// Exists reports whether key exists.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	err = s.classify(err, key)
	if errors.Is(err, ErrNoSuchKey) {
		return false, nil
	}
	return err == nil, err
}

// AbortIncomplete aborts the multipart uploads left under prefix (by an
// attempt cut short), so that their parts do not linger in the bucket.
func (s *Store) AbortIncomplete(ctx context.Context, prefix string) error {
	for u := range s.client.ListIncompleteUploads(ctx, s.bucket, prefix, true) {
		if u.Err != nil {
			return s.classify(u.Err, prefix)
		}
		if err := s.client.RemoveIncompleteUpload(ctx, s.bucket, u.Key); err != nil {
			return s.classify(err, u.Key)
		}
	}
	return nil
}

// classify wraps err with the sentinel its S3 error code stands for. The
// message holds no text of the answer (see s3Reason): only the S3 error
// code when it is a documented one, the HTTP status, or for a request that
// got no answer the kind of transport error.
func (s *Store) classify(err error, key string) error {
	if err == nil {
		return nil
	}
	where := "bucket " + s.bucket
	if key != "" {
		where = fmt.Sprintf("object %s/%s", s.bucket, key)
	}
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		var ue *url.Error
		if errors.As(err, &ue) {
			return &redactedError{msg: where + ": " + describeTransport(ue), kinds: transportSentinels(err)}
		}
		return &redactedError{msg: where + ": " + transportKind(err), kinds: transportSentinels(err)}
	}
	reason := s3Reason(resp)
	switch resp.Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled":
		return fmt.Errorf("%s: %w (%s)", where, ErrAccessDenied, reason)
	case "NoSuchBucket":
		return fmt.Errorf("%s: %w", where, ErrNoSuchBucket)
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%s: %w", where, ErrNoSuchKey)
	}
	if resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("%s: %w (%s)", where, ErrAccessDenied, reason)
	}
	return fmt.Errorf("%s: %w", where, &redactedError{msg: "the store answered " + reason})
}

// transportSentinels are the context errors err matches, kept through the
// redaction (a canceled attempt is told apart).
func transportSentinels(err error) []error {
	var out []error
	for _, s := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, s) {
			out = append(out, s)
		}
	}
	return out
}

// Reason is the ObjectStoreReady condition reason for an error of a Store.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrAccessDenied):
		return cachev1beta1.BackupAccessDeniedReason
	case errors.Is(err, ErrNoSuchBucket):
		return cachev1beta1.BackupNoSuchBucketReason
	default:
		return cachev1beta1.BackupObjectStoreUnreachableReason
	}
}

// countingReader counts what it reads in n and, when total is set, adds
// it to total (for readers in other goroutines).
type countingReader struct {
	r     io.Reader
	n     int64
	total *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.total != nil {
		c.total.Add(int64(n))
	}
	return n, err
}
