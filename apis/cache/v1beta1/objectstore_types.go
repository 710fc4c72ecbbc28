package v1beta1

// ObjectStoreSpec says where backups live: an S3-compatible object store
// (AWS S3, MinIO, SeaweedFS, Ceph RGW, ...), a bucket and a key prefix.
// A backup's objects are written under
// <prefix>/<namespace>/<cluster>/<backup name>/ in the bucket.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.credentialsSecretRef) && has(self.credentialsVault))",message="at most one of credentialsSecretRef or credentialsVault may be set"
type ObjectStoreSpec struct {
	// Endpoint is the S3 API's URL, for example https://s3.eu-west-1.amazonaws.com
	// or http://minio.storage.svc:9000. http:// sends data and the signed
	// requests unencrypted.
	// +kubebuilder:validation:Pattern=`^https?://[^/]+/?$`
	// +kubebuilder:validation:MaxLength=512
	// +required
	Endpoint string `json:"endpoint"`

	// Bucket is the bucket's name. It must exist: the operator never creates it.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +required
	Bucket string `json:"bucket"`

	// Prefix is prepended to every object key, without a leading or trailing
	// slash, for example redis/prod. Every '/'-separated part is non-empty
	// and neither . nor .. (a backup's objects stay under its own path).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+)(/([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+))*)?$`
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Region is the bucket's region, signed into every request.
	// Defaults to us-east-1.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:default=us-east-1
	// +optional
	Region string `json:"region,omitempty"`

	// CredentialsSecretRef names a Secret in the object's namespace holding
	// the access key pair. Unset sends anonymous requests.
	// +optional
	CredentialsSecretRef *ObjectStoreCredentials `json:"credentialsSecretRef,omitempty"`

	// CredentialsVault reads the access key pair from a Vault KV v2 secret,
	// logging in as a RedisCluster's spec.auth.vault does. At most one of
	// credentialsSecretRef and credentialsVault. Backups, retention and
	// restores (spec.bootstrap.fromBackup) read it; a restore hands the pair
	// to its pods in the Secret <cluster>-restore-keys, deleted once the
	// cluster is formed.
	// +optional
	CredentialsVault *ObjectStoreVaultCredentials `json:"credentialsVault,omitempty"`

	// CASecretRef names a Secret key holding the PEM CA bundle that signs
	// the endpoint's certificate (https only).
	// +optional
	CASecretRef *SecretKeySelector `json:"caSecretRef,omitempty"`

	// ForcePathStyle addresses the bucket in the path
	// (https://host/bucket/key) rather than in the host name
	// (https://bucket.host/key), as most self-hosted stores need.
	// Defaults to false.
	// +kubebuilder:default=false
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
}

// ObjectStoreCredentials names the Secret keys of an S3 access key pair.
type ObjectStoreCredentials struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// AccessKeyIDKey is the key holding the access key ID.
	// Defaults to accessKeyID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=accessKeyID
	// +optional
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty"`

	// SecretAccessKeyKey is the key holding the secret access key.
	// Defaults to secretAccessKey.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=secretAccessKey
	// +optional
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
}

// ObjectStoreVaultCredentials is an S3 access key pair in a Vault KV v2 secret.
type ObjectStoreVaultCredentials struct {
	// Vault is the secret and the login, with the fields and defaults of a
	// RedisCluster's spec.auth.vault (its key and refreshInterval are not
	// used: the keys are below, and the pair is read when a backup starts
	// and when retention deletes one). An empty serviceAccountName logs in
	// as the backed-up cluster's service account (named after it).
	// +required
	Vault VaultSource `json:"vault"`

	// AccessKeyIDKey is the secret's field holding the access key ID.
	// Defaults to accessKeyID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=accessKeyID
	// +optional
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty"`

	// SecretAccessKeyKey is the secret's field holding the secret access key.
	// Defaults to secretAccessKey.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=secretAccessKey
	// +optional
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
}

// BootstrapSpec says how a new RedisCluster gets its first data.
type BootstrapSpec struct {
	// FromBackup starts every shard from its RDB in a backup: each pod
	// downloads its shard's RDB before redis-server starts, and the cluster
	// is formed with the slot ranges the backup recorded. The backup must
	// have as many shards as spec.shards and a Redis version no newer than
	// the image's.
	// +optional
	FromBackup *FromBackupSpec `json:"fromBackup,omitempty"`
}

// FromBackupSpec names a backup: a RedisClusterBackup of the namespace, or
// an object store and the path of a backup in it (for a backup whose
// RedisClusterBackup is gone, or made in another Kubernetes cluster).
//
// +kubebuilder:validation:XValidation:rule="has(self.backupName) != has(self.objectStore)",message="exactly one of backupName or objectStore (with path) must be set"
// +kubebuilder:validation:XValidation:rule="has(self.objectStore) == has(self.path)",message="objectStore and path go together"
type FromBackupSpec struct {
	// BackupName is a Completed RedisClusterBackup in the RedisCluster's namespace.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	BackupName string `json:"backupName,omitempty"`

	// ObjectStore is where the backup lives.
	// +optional
	ObjectStore *ObjectStoreSpec `json:"objectStore,omitempty"`

	// Path is the backup's key prefix in the bucket, the one its
	// RedisClusterBackup showed as status.path (<prefix>/<namespace>/<cluster>/<backup name>).
	// Its namespace part must be this RedisCluster's namespace: a restore
	// reads only backups of its own namespace, also one made in another
	// Kubernetes cluster (restore it into a namespace of the same name). The
	// manifest found there must record that namespace, cluster and backup
	// name; its cluster may differ from this RedisCluster's name. The prefix's
	// parts are non-empty and neither . nor .., the namespace and cluster are
	// DNS-1123 labels and the backup name a DNS-1123 subdomain; the operator
	// refuses any other path (InvalidSpec) before it contacts the store.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+)/)*[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Path string `json:"path,omitempty"`
}
