package redistest

import (
	"crypto/tls"
	"fmt"
)

// TLS is the TLS material of nodes started with Options.TLS: paths of the
// certificate, its key and the CA bundle, and the client configuration
// the helper's own clients dial with.
type TLS struct {
	CertFile, KeyFile, CAFile string
	// AuthClients is tls-auth-clients (yes, no or optional); empty means no.
	AuthClients string
	// Client is the helper's client configuration (it must trust CAFile).
	Client *tls.Config
}

// lines writes the redis.conf lines of a TLS-only node listening on port:
// as the operator renders them (controllers/resources RenderConfig).
func (t *TLS) lines(line func(string, ...any), port int) {
	auth := t.AuthClients
	if auth == "" {
		auth = "no"
	}
	line("port 0")
	line("tls-port %d", port)
	line("tls-cert-file %s", t.CertFile)
	line("tls-key-file %s", t.KeyFile)
	line("tls-ca-cert-file %s", t.CAFile)
	line("tls-replication yes")
	line("tls-cluster yes")
	line("tls-auth-clients %s", auth)
}

// client is the helper's client TLS configuration, nil without TLS.
func (t *TLS) client() *tls.Config {
	if t == nil {
		return nil
	}
	return t.Client
}

// String names the files, for failure messages.
func (t *TLS) String() string {
	return fmt.Sprintf("cert %s, key %s, CA %s", t.CertFile, t.KeyFile, t.CAFile)
}
