package backup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7"

	"github.com/redis-operator/redis-operator/controllers/credentials"
)

// What answers at an object store endpoint or a Vault address is not
// necessarily a store or a Vault (an endpoint may point at any service the
// operator's network position reaches), and whatever it answers would end
// in a status, an event or the operator's log, where whoever wrote the spec
// reads it. So no text of an answer is ever kept: of an S3 error, its code
// when it is one of the codes S3 documents and the HTTP status; of a Vault
// error, its HTTP status; of a transport error, its kind.

// s3Codes are the S3 error codes an error message may name (Amazon S3's
// "Error responses" list and the ones minio-go makes up). Any other code
// is answer text, and is not shown.
var s3Codes = map[string]bool{}

func init() {
	for _, c := range strings.Fields(`AccessDenied AccessForbidden AccountProblem AllAccessDisabled
		AuthorizationHeaderMalformed AuthorizationQueryParametersError BadDigest BadRequest BucketAlreadyExists
		BucketAlreadyOwnedByYou BucketNotEmpty Conflict CredentialsNotSupported EntityTooLarge EntityTooSmall
		ExpiredToken IllegalLocationConstraintException IllegalVersioningConfigurationException IncompleteBody
		IncorrectNumberOfFilesInPostRequest InlineDataTooLarge InternalError InvalidAccessKeyId InvalidArgument
		InvalidBucketName InvalidBucketState InvalidDigest InvalidEncryptionAlgorithmError InvalidLocationConstraint
		InvalidObjectState InvalidPart InvalidPartOrder InvalidPayer InvalidPolicyDocument InvalidRange
		InvalidRegion InvalidRequest InvalidSecurity InvalidStorageClass InvalidToken InvalidURI KeyTooLongError
		MalformedACLError MalformedPOSTRequest MalformedXML MaxMessageLengthExceeded MetadataTooLarge
		MethodNotAllowed MissingContentLength MissingRequestBodyError MissingSecurityHeader NoSuchBucket
		NoSuchBucketPolicy NoSuchKey NoSuchUpload NoSuchVersion NotFound NotImplemented NotModified
		OperationAborted PermanentRedirect PreconditionFailed QuotaExceeded Redirect RequestIsNotMultiPartContent
		RequestTimeTooSkewed RequestTimeout RequestTorrentOfBucketError ServiceUnavailable
		SignatureDoesNotMatch SlowDown TemporaryRedirect TokenRefreshRequired TooManyBuckets UnexpectedContent
		UnresolvableGrantByEmailAddress UserKeyMustBeSpecified XAmzContentSHA256Mismatch
		XMinioServerNotInitialized`) {
		s3Codes[c] = true
	}
}

// s3Reason is the short, answer-free description of a store's error
// response: "S3 <code>, HTTP <status>", either part left out when unknown
// or not a documented code.
func s3Reason(resp minio.ErrorResponse) string {
	var parts []string
	if s3Codes[resp.Code] {
		parts = append(parts, "S3 "+resp.Code)
	}
	if resp.StatusCode != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d", resp.StatusCode))
	}
	if len(parts) == 0 {
		return "an unrecognised error"
	}
	return strings.Join(parts, ", ")
}

// transportKind is the kind of a transport error (the request got no HTTP
// answer, or one that is not HTTP): never its text, which may quote what
// the other side sent (net/http's "malformed HTTP response" does).
func transportKind(err error) string {
	var (
		dnsErr   *net.DNSError
		netErr   net.Error
		unknown  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		opErr    *net.OpError
		alertErr tls.AlertError
	)
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.As(err, &dnsErr):
		return "host name not found"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &unknown), errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &verify):
		return "TLS certificate not trusted"
	case errors.As(err, &record):
		return "the server does not speak TLS"
	case errors.As(err, &alertErr):
		return "TLS handshake refused"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection closed by the server"
	case errors.Is(err, net.ErrClosed):
		// net/http closed the connection while the body was still being
		// written: what it read back was not an answer it could use.
		return "connection closed while sending"
	case strings.Contains(err.Error(), "malformed HTTP"):
		return "the answer is not HTTP"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "cannot connect"
	default:
		return "request failed"
	}
}

// describeTransport is err's message with the text of the first *url.Error
// in its chain (Op, URL, then its cause's text) replaced by Op, URL and the
// cause's kind (transportKind); err's message as it is when it holds none.
// The URL is the one the spec gave.
func describeTransport(err error) string {
	msg := err.Error()
	var ue *url.Error
	if !errors.As(err, &ue) {
		return msg
	}
	full := ue.Error()
	short := fmt.Sprintf("%s %s: %s", ue.Op, redactURL(ue.URL), transportKind(ue.Err))
	if strings.Contains(msg, full) {
		return strings.Replace(msg, full, short, 1)
	}
	return short
}

// redactURL drops the query (a presigned URL's signature) and user info.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return fmt.Sprintf("%q", u.String())
}

// redactedError carries a message stripped of answer text and the sentinel
// errors the original matched, so that errors.Is still classifies it.
type redactedError struct {
	msg   string
	kinds []error
}

func (e *redactedError) Error() string   { return e.msg }
func (e *redactedError) Unwrap() []error { return e.kinds }

// vaultSentinels are the credentials package's errors a Vault error is
// classified by (credentials.Reason), kept through the redaction.
var vaultSentinels = []error{
	credentials.ErrInvalidConfig, credentials.ErrAddressNotAllowed, credentials.ErrAudienceNotAllowed,
	credentials.ErrVaultUnreachable, credentials.ErrAuthFailed, credentials.ErrPermissionDenied,
	credentials.ErrSecretNotFound, credentials.ErrKeyMissing, credentials.ErrInvalidPassword,
	credentials.ErrVaultError, credentials.ErrKubernetesAPI, context.Canceled, context.DeadlineExceeded,
}

// vaultAnswered ends the part of a credentials error message that is the
// operator's own: what follows "Vault answered <status>" is Vault's text.
var vaultAnswered = regexp.MustCompile(`Vault answered [0-9]{3}`)

// maxRedacted bounds a redacted message.
const maxRedacted = 512

// redactVault returns err (from credentials) without any text Vault, or
// whatever answered at its address, sent: the message up to "Vault answered
// <status>", transport errors by their kind. Its errors.Is matches the
// sentinels err matched.
func redactVault(err error) error {
	if err == nil {
		return nil
	}
	msg := describeTransport(err)
	if loc := vaultAnswered.FindStringIndex(msg); loc != nil {
		msg = msg[:loc[1]]
	}
	if len(msg) > maxRedacted {
		msg = strings.ToValidUTF8(msg[:maxRedacted], "") + "..."
	}
	out := &redactedError{msg: msg}
	for _, s := range vaultSentinels {
		if errors.Is(err, s) {
			out.kinds = append(out.kinds, s)
		}
	}
	return out
}
