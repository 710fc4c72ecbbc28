package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TLSSpec turns on TLS for every connection to and between the cluster's
// nodes: clients on the client port (6379), replication (tls-replication
// yes) and the cluster bus (tls-cluster yes). The certificates come from a
// CA the operator makes for this cluster (Secret <name>-tls-ca, owned by
// the RedisCluster, the server certificate in Secret <name>-tls), or, with
// secretName, from a Secret holding tls.crt, tls.key and ca.crt (the shape
// cert-manager's Certificate writes).
type TLSSpec struct {
	// Enabled serves TLS on the client port 6379 and encrypts replication
	// and the cluster bus. Changing it on a running cluster is refused: its
	// nodes could not talk to each other while some run TLS and some not.
	// Defaults to false.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// PlainPort keeps a plain-text client port (6380) open beside the TLS
	// one, for clients that do not speak TLS yet. Replication and the bus
	// stay TLS. Defaults to false: no plain-text port.
	// +kubebuilder:default=false
	// +optional
	PlainPort bool `json:"plainPort,omitempty"`

	// AuthClients is Redis's tls-auth-clients: None accepts clients without
	// a certificate (no), Required refuses a client without one signed by
	// the CA, ca.crt (yes), Optional checks one when a client sends it
	// (optional). (Not Yes/No: YAML 1.1 reads those as booleans.)
	// Defaults to None.
	// +kubebuilder:validation:Enum=None;Required;Optional
	// +kubebuilder:default=None
	// +optional
	AuthClients TLSAuthClients `json:"authClients,omitempty"`

	// SecretName names a Secret of the RedisCluster's namespace with
	// tls.crt (the nodes' certificate, PEM), tls.key (its key, PEM) and
	// ca.crt (the CA that signed it, PEM), such as cert-manager writes for
	// a Certificate. The operator serves it as it is and applies a changed
	// one without restarts. Empty: the operator's own CA issues the
	// certificate and renews it before it expires.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// TLSAuthClients is the value of tls-auth-clients.
type TLSAuthClients string

const (
	// TLSAuthClientsNone accepts clients without a certificate.
	TLSAuthClientsNone TLSAuthClients = "None"
	// TLSAuthClientsRequired refuses clients without a certificate signed by the CA.
	TLSAuthClientsRequired TLSAuthClients = "Required"
	// TLSAuthClientsOptional verifies a certificate when the client sends one.
	TLSAuthClientsOptional TLSAuthClients = "Optional"
)

// TLSStatus tells which certificate the nodes serve. Never a key.
type TLSStatus struct {
	// SecretName is the Secret the pods mount the certificate from.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// Serial is the serial number of that certificate, in upper-case hex
	// (as `openssl x509 -serial` prints it).
	// +optional
	Serial string `json:"serial,omitempty"`

	// NotAfter is when that certificate expires.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`

	// AppliedSerial is the serial every node was last seen serving after
	// the operator told it to reload its certificate files
	// (CONFIG SET tls-cert-file ...); it trails Serial while a new
	// certificate is being applied.
	// +optional
	AppliedSerial string `json:"appliedSerial,omitempty"`

	// CANotAfter is when the operator's CA that signs that certificate
	// expires (not set with spec.tls.secretName). The operator renews the
	// CA once less than a third of its life is left (caRenewal).
	// +optional
	CANotAfter *metav1.Time `json:"caNotAfter,omitempty"`

	// CARenewal is the step of a renewal of the operator's CA under way,
	// empty when none: NewCAPublished, ca.crt holds the old and the new CA
	// and the old one still signs, until every node has loaded both;
	// NewCASigning, the new CA signs the nodes' certificate and the old one
	// stays in ca.crt until every node serves it.
	// +kubebuilder:validation:Enum=NewCAPublished;NewCASigning
	// +optional
	CARenewal TLSCARenewal `json:"caRenewal,omitempty"`
}

// TLSCARenewal is the step of a renewal of the operator's CA.
type TLSCARenewal string

const (
	// TLSCARenewalPublished: both CAs are trusted, the old one signs.
	TLSCARenewalPublished TLSCARenewal = "NewCAPublished"
	// TLSCARenewalSigning: the new CA signs, the old one is still trusted.
	TLSCARenewalSigning TLSCARenewal = "NewCASigning"
)

// TLSEnabled reports whether spec.tls turns TLS on.
func (s *RedisClusterSpec) TLSEnabled() bool {
	return s.TLS != nil && s.TLS.Enabled
}
