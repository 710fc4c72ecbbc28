package webhooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
)

// validHub is a v1beta1 RedisCluster as the API server hands it to the
// webhook: every schema default filled in.
func validHub() *cachev1beta1.RedisCluster {
	return &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default"},
		Spec: cachev1beta1.RedisClusterSpec{
			Shards:           3,
			ReplicasPerShard: 1,
			Image:            "redis:7.0",
			ImagePullPolicy:  corev1.PullIfNotPresent,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
			Config: map[string]string{"maxmemory": "256mb", "maxmemory-policy": "allkeys-lru", "appendonly": "yes"},
			Storage: cachev1beta1.StorageSpec{
				StorageClassName:  ptr.To("standard"),
				Size:              ptr.To(resource.MustParse("2Gi")),
				DeleteClaimPolicy: cachev1beta1.DeleteClaimRetain,
			},
			Exporter:        cachev1beta1.ExporterSpec{Image: "oliver006/redis_exporter:v1.67.0"},
			LostShardPolicy: cachev1beta1.LostShardWait,
		},
	}
}

func vaultAuth() *cachev1beta1.AuthSpec {
	return &cachev1beta1.AuthSpec{Vault: &cachev1beta1.VaultSource{
		Address: "https://vault.vault.svc:8200", Mount: "secret", Path: "redis/prod", Key: "password",
		Role: "redis", AuthMount: "kubernetes", Audience: "vault",
		RefreshInterval: &metav1.Duration{Duration: 5 * time.Minute},
	}}
}

// validSpoke is a v1alpha1 RedisCluster created through v1alpha1 (no
// conversion data).
func validSpoke() *cachev1alpha1.RedisCluster {
	return &cachev1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default"},
		Spec: cachev1alpha1.RedisClusterSpec{
			Replicas: 6,
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			Config:       map[string]string{"maxmemory": "512mb"},
			StorageClass: "standard",
		},
	}
}

// spokeOf is hub as a v1alpha1 client reads it: with conversion data.
func spokeOf(t *testing.T, hub *cachev1beta1.RedisCluster) *cachev1alpha1.RedisCluster {
	t.Helper()
	spoke := &cachev1alpha1.RedisCluster{}
	if err := spoke.ConvertFrom(hub.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	return spoke
}

// causes returns the field errors of an Invalid error as "field: message".
func causes(t *testing.T, err error) []string {
	t.Helper()
	var status *apierrors.StatusError
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid status error, got %T: %v", err, err)
	}
	var out []string
	for _, c := range status.ErrStatus.Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	return out
}

type malformed struct {
	name string
	// Exactly one of hub or spoke builds the object under test; old, when
	// set, makes it an update from the object old builds.
	hub      func(*cachev1beta1.RedisCluster)
	oldHub   func(*cachev1beta1.RedisCluster)
	spoke    func(*testing.T) *cachev1alpha1.RedisCluster
	oldSpoke func(*testing.T) *cachev1alpha1.RedisCluster
	// want is the one cause expected: "<field path>: <message>".
	want string
}

func config(kv ...string) func(*cachev1beta1.RedisCluster) {
	return func(rc *cachev1beta1.RedisCluster) {
		for i := 0; i < len(kv); i += 2 {
			rc.Spec.Config[kv[i]] = kv[i+1]
		}
	}
}

// TestMalformedSpecs: every malformed spec is rejected with exactly one
// cause naming the field and saying what is wrong.
func TestMalformedSpecs(t *testing.T) {
	cases := []malformed{
		// v1beta1: shape.
		{name: "too few shards", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 2 },
			want: "spec.shards: Invalid value: 2: must be at least 3: Redis Cluster needs a majority of at least 3 masters to agree that a master failed"},
		{name: "too many shards", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 300 },
			want: "spec.shards: Invalid value: 300: must be at most 256"},
		{name: "too many replicas per shard", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 6 },
			want: "spec.replicasPerShard: Invalid value: 6: must be from 0 to 5"},
		{name: "image with capitals", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Image = "Redis:7.0" },
			want: `spec.image: Invalid value: "Redis:7.0": must be a container image reference such as redis:7.0 or registry.example.com/redis@sha256:<digest>: invalid reference format: repository name (library/Redis) must be lowercase`},
		{name: "empty image", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Image = "" },
			want: "spec.image: Required value: a container image reference such as redis:7.0"},
		{name: "image pull secret without name", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: ""}}
		}, want: "spec.imagePullSecrets[0].name: Required value: the name of a Secret of type kubernetes.io/dockerconfigjson"},

		// v1beta1: redis.conf keys the operator owns.
		{name: "port", hub: config("port", "7000"),
			want: "spec.config[port]: Forbidden: port is set by the operator: the operator sets the addresses and ports every pod listens on and announces, which the cluster bus and the clients rely on"},
		{name: "cluster-enabled", hub: config("cluster-enabled", "no"),
			want: "spec.config[cluster-enabled]: Forbidden: cluster-enabled is set by the operator: the operator runs every pod in cluster mode with its own nodes.conf on the pod's volume"},
		{name: "cluster-config-file", hub: config("cluster-config-file", "/data/other.conf"),
			want: "spec.config[cluster-config-file]: Forbidden: cluster-config-file is set by the operator: the operator runs every pod in cluster mode with its own nodes.conf on the pod's volume"},
		{name: "cluster-announce-ip", hub: config("cluster-announce-ip", "10.0.0.1"),
			want: "spec.config[cluster-announce-ip]: Forbidden: cluster-announce-ip is set by the operator: the operator sets the addresses and ports every pod listens on and announces, which the cluster bus and the clients rely on"},
		{name: "bind", hub: config("bind", "0.0.0.0"),
			want: "spec.config[bind]: Forbidden: bind is set by the operator: the operator sets the addresses and ports every pod listens on and announces, which the cluster bus and the clients rely on"},
		{name: "dir", hub: config("dir", "/tmp"),
			want: "spec.config[dir]: Forbidden: dir is set by the operator: the operator owns the file layout on the pod's volume"},
		{name: "requirepass", hub: config("requirepass", "hunter2"),
			want: "spec.config[requirepass]: Forbidden: requirepass is set by the operator: passwords and users come from spec.auth"},
		{name: "masterauth", hub: config("masterauth", "hunter2"),
			want: "spec.config[masterauth]: Forbidden: masterauth is set by the operator: passwords and users come from spec.auth"},
		{name: "slaveof", hub: config("slaveof", "10.0.0.1 6379"),
			want: "spec.config[slaveof]: Forbidden: slaveof is set by the operator: the operator owns replication: it pairs replicas with masters with CLUSTER REPLICATE"},
		{name: "include", hub: config("include", "/etc/redis/extra.conf"),
			want: "spec.config[include]: Forbidden: include is set by the operator: the operator writes the whole redis.conf; files it does not know of are not in the pods"},
		{name: "daemonize", hub: config("daemonize", "yes"),
			want: "spec.config[daemonize]: Forbidden: daemonize is set by the operator: the container runtime supervises redis-server, which must stay in the foreground and log to standard output"},
		{name: "logfile", hub: config("logfile", "/var/log/redis.log"),
			want: "spec.config[logfile]: Forbidden: logfile is set by the operator: the container runtime supervises redis-server, which must stay in the foreground and log to standard output"},
		{name: "tls-port", hub: config("tls-port", "6380"),
			want: "spec.config[tls-port]: Forbidden: tls-port is set by the operator: the operator sets the addresses and ports every pod listens on and announces, which the cluster bus and the clients rely on"},
		{name: "tls-cluster", hub: config("tls-cluster", "yes"),
			want: "spec.config[tls-cluster]: Forbidden: tls-cluster is set by the operator: the operator configures TLS from spec.tls (certificate files, ports, replication and bus encryption)"},
		{name: "renaming CLUSTER", hub: config("rename-command", `CLUSTER ""`),
			want: `spec.config[rename-command]: Invalid value: "CLUSTER \"\"": CLUSTER must keep its name: the operator, the redis_exporter sidecar or Redis Cluster clients use it`},
		{name: "renaming CONFIG", hub: config("rename-command", "config b840fc02d524045429941cc15f59e41cb7be6c52"),
			want: `spec.config[rename-command]: Invalid value: "config b840fc02d524045429941cc15f59e41cb7be6c52": CONFIG must keep its name: the operator, the redis_exporter sidecar or Redis Cluster clients use it`},
		{name: "upper-case key slipping past the owned list", hub: config("PORT", "7000"),
			want: `spec.config[PORT]: Invalid value: "PORT": must be a Redis parameter name in lowercase letters, digits, '-' and '_' (Redis ignores letter case, so other spellings could slip past the parameters the operator owns)`},
		{name: "line break smuggling a directive", hub: config("maxmemory", "1gb\nrequirepass x"),
			want: `spec.config[maxmemory]: Invalid value: must not contain line breaks or NUL characters: each parameter is one line of redis.conf`},
		{name: "alias set twice", hub: config("replica-priority", "10", "slave-priority", "20"),
			want: `spec.config[slave-priority]: Invalid value: "slave-priority": is the same Redis parameter as replica-priority, which is also set`},

		// v1beta1: redis.conf value grammar.
		{name: "memory with a decimal point", hub: config("maxmemory", "1.5gb"),
			want: `spec.config[maxmemory]: Invalid value: "1.5gb": must be a memory size: a whole number of bytes, optionally followed by a unit b, k, kb, m, mb, g or gb (for example 100mb or 1gb)`},
		{name: "memory with an unknown unit", hub: config("repl-backlog-size", "1tb"),
			want: `spec.config[repl-backlog-size]: Invalid value: "1tb": must be a memory size: a whole number of bytes, optionally followed by a unit b, k, kb, m, mb, g or gb (for example 100mb or 1gb)`},
		{name: "memory below Redis's minimum", hub: config("client-query-buffer-limit", "512kb"),
			want: `spec.config[client-query-buffer-limit]: Invalid value: "512kb": must be from 1mb to 9223372036854775807 bytes`},
		{name: "eviction policy", hub: config("maxmemory-policy", "lru"),
			want: `spec.config[maxmemory-policy]: Unsupported value: "lru": supported values: "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"`},
		{name: "appendfsync", hub: config("appendfsync", "sometimes"),
			want: `spec.config[appendfsync]: Unsupported value: "sometimes": supported values: "always", "everysec", "no"`},
		{name: "loglevel of a later Redis", hub: config("loglevel", "nothing"),
			want: `spec.config[loglevel]: Unsupported value: "nothing": supported values: "debug", "verbose", "notice", "warning"`},
		{name: "boolean written true", hub: config("appendonly", "true"),
			want: `spec.config[appendonly]: Invalid value: "true": must be yes or no`},
		{name: "integer with a fraction", hub: config("hz", "10.5"),
			want: `spec.config[hz]: Invalid value: "10.5": must be an integer from 0 to 2147483647`},
		{name: "integer above Redis's maximum", hub: config("io-threads", "129"),
			want: `spec.config[io-threads]: Invalid value: "129": must be an integer from 1 to 128`},
		{name: "node timeout of zero", hub: config("cluster-node-timeout", "0"),
			want: `spec.config[cluster-node-timeout]: Invalid value: "0": must be an integer from 1 to 9223372036854775807`},
		{name: "save without changes", hub: config("save", "3600"),
			want: `spec.config[save]: Invalid value: "3600": must be "" (no snapshots) or pairs of <seconds> <changes> separated by spaces, seconds at least 1 (for example 3600 1 300 100)`},
		{name: "client output buffer limit missing seconds", hub: config("client-output-buffer-limit", "pubsub 32mb 8mb"),
			want: `spec.config[client-output-buffer-limit]: Invalid value: "pubsub 32mb 8mb": must be groups of <class> <hard limit> <soft limit> <soft seconds>, class normal, replica or pubsub (for example replica 256mb 64mb 60)`},
		{name: "shutdown save and nosave", hub: config("shutdown-on-sigterm", "save nosave"),
			want: `spec.config[shutdown-on-sigterm]: Invalid value: "save nosave": save and nosave cannot be used together`},
		{name: "shutdown failover of Valkey", hub: config("shutdown-on-sigterm", "failover"),
			want: `spec.config[shutdown-on-sigterm]: Invalid value: "failover": must be one or more of default, save, nosave, now, force separated by spaces`},
		{name: "keyspace event class", hub: config("notify-keyspace-events", "KEQ"),
			want: `spec.config[notify-keyspace-events]: Invalid value: "KEQ": must consist of the event class characters Ag$lshzxeKEtmdn`},
		{name: "oom score values", hub: config("oom-score-adj-values", "0 200 3000"),
			want: `spec.config[oom-score-adj-values]: Invalid value: "0 200 3000": must be three integers from -2000 to 2000 (for replicas, masters and background children)`},
		{name: "percentile above 100", hub: config("latency-tracking-info-percentiles", "50 101"),
			want: `spec.config[latency-tracking-info-percentiles]: Invalid value: "50 101": must be decimal percentiles from 0 to 100 separated by single spaces (for example 50 99 99.9)`},
		{name: "clients memory percentage above 100", hub: config("maxmemory-clients", "150%"),
			want: `spec.config[maxmemory-clients]: Invalid value: "150%": must be a memory size (for example 100mb) or a percentage of maxmemory from 0% to 100%`},

		// v1beta1: resources and storage.
		{name: "memory request above limit", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}, want: `spec.resources.requests[memory]: Invalid value: "1Gi": must be less than or equal to memory limit of 512Mi`},
		{name: "negative cpu", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("-1")
		}, want: `spec.resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`},
		{name: "misspelt resource", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Resources.Limits["memroy"] = resource.MustParse("1Gi")
		}, want: `spec.resources.limits[memroy]: Invalid value: "memroy": must be cpu, memory, ephemeral-storage, hugepages-<size> or a fully-qualified extended resource name such as example.com/device`},
		{name: "exporter request above limit", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Exporter.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			}
		}, want: `spec.exporter.resources.requests[cpu]: Invalid value: "200m": must be less than or equal to cpu limit of 100m`},
		{name: "zero storage", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Storage.Size = ptr.To(resource.MustParse("0")) },
			want: `spec.storage.size: Invalid value: "0": must be at least 64Mi: the volume holds the node's nodes.conf, RDB snapshot and append-only file`},
		{name: "tiny storage", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Storage.Size = ptr.To(resource.MustParse("10Mi")) },
			want: `spec.storage.size: Invalid value: "10Mi": must be at least 64Mi: the volume holds the node's nodes.conf, RDB snapshot and append-only file`},
		{name: "storage class name", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Storage.StorageClassName = ptr.To("Fast_SSD") },
			want: `spec.storage.storageClassName: Invalid value: "Fast_SSD": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},

		// v1beta1: auth sources with a missing or extra piece.
		{name: "auth disabled with a source", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = &cachev1beta1.AuthSpec{Disabled: true, SecretRef: &cachev1beta1.SecretKeySelector{Name: "redis-password", Key: "password"}}
		}, want: "spec.auth.disabled: Forbidden: disabled turns authentication off: remove secretRef and vault, or disabled"},
		{name: "auth with both sources", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.SecretRef = &cachev1beta1.SecretKeySelector{Name: "redis-password", Key: "password"}
		}, want: "spec.auth.vault: Forbidden: set only one of secretRef or vault"},
		{name: "secret without name", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = &cachev1beta1.AuthSpec{SecretRef: &cachev1beta1.SecretKeySelector{Key: "password"}}
		}, want: "spec.auth.secretRef.name: Required value: the name of the Secret holding the password"},
		{name: "vault role empty and no token", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.Vault.Role = ""
		}, want: "spec.auth.vault.role: Required value: set role (a role of Vault's Kubernetes auth method) or tokenSecretRef (a Secret holding a Vault token)"},
		{name: "vault role and token", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.Vault.TokenSecretRef = &cachev1beta1.SecretKeySelector{Name: "vault-token", Key: "token"}
		}, want: "spec.auth.vault.tokenSecretRef: Forbidden: set only one of role or tokenSecretRef"},
		{name: "vault token secret without name", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.Vault.Role = ""
			rc.Spec.Auth.Vault.TokenSecretRef = &cachev1beta1.SecretKeySelector{Key: "token"}
		}, want: "spec.auth.vault.tokenSecretRef.name: Required value: the name of the Secret holding the Vault token"},
		{name: "vault address without host", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.Vault.Address = "https://"
		}, want: `spec.auth.vault.address: Invalid value: "https://": must be an http or https URL with a host, for example https://vault.vault.svc:8200`},
		{name: "vault path of slashes", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.Vault.Path = "/"
		}, want: "spec.auth.vault.path: Required value: the secret's path inside the KV v2 mount, for example redis/prod"},
		{name: "vault refresh interval negative", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.Vault.RefreshInterval = &metav1.Duration{Duration: -time.Minute}
		}, want: `spec.auth.vault.refreshInterval: Invalid value: "-1m0s": must be positive`},

		// v1beta1: exporter and pod placement.
		{name: "exporter enabled without image", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Exporter = cachev1beta1.ExporterSpec{Enabled: true}
		}, want: "spec.exporter.image: Required value: the exporter is enabled: set the redis_exporter image, for example oliver006/redis_exporter:v1.67.0"},
		{name: "pod label the operator selects on", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Labels = map[string]string{"app.kubernetes.io/instance": "other"}
		}, want: "spec.pod.labels[app.kubernetes.io/instance]: Forbidden: the operator or Kubernetes sets this label on the Redis pods to select them"},
		{name: "toleration Exists with a value", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Value: "redis"}}
		}, want: `spec.pod.tolerations[0].value: Invalid value: "redis": must be empty when operator is Exists`},
		{name: "spread with zero skew", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, want: "spec.pod.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be at least 1"},
		{name: "anti-affinity without topology key", hub: func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{}},
			}}
		}, want: "spec.pod.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: a node label key such as kubernetes.io/hostname"},
		{name: "priority class with spaces", hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Pod.PriorityClassName = "high priority" },
			want: `spec.pod.priorityClassName: Invalid value: "high priority": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},

		// v1beta1 updates: immutable and shrinking fields.
		{name: "storage class changed", oldHub: func(*cachev1beta1.RedisCluster) {}, hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Storage.StorageClassName = ptr.To("fast") },
			want: `spec.storage.storageClassName: Invalid value: "fast": is immutable once set (it is "standard"): the volumes already provisioned cannot move to another StorageClass`},
		{name: "storage class removed", oldHub: func(*cachev1beta1.RedisCluster) {}, hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Storage.StorageClassName = nil },
			want: `spec.storage.storageClassName: Invalid value: "": is immutable once set (it is "standard"): the volumes already provisioned cannot move to another StorageClass`},
		{name: "storage shrunk", oldHub: func(*cachev1beta1.RedisCluster) {}, hub: func(rc *cachev1beta1.RedisCluster) { rc.Spec.Storage.Size = ptr.To(resource.MustParse("1Gi")) },
			want: "spec.storage.size: Forbidden: may not shrink from 2Gi to 1Gi: Kubernetes cannot shrink a PersistentVolumeClaim"},

		// v1alpha1: errors carry v1alpha1's field names.
		{name: "v1alpha1 replicas giving two shards", spoke: func(t *testing.T) *cachev1alpha1.RedisCluster {
			hub := validHub()
			hub.Spec.ReplicasPerShard = 2
			spoke := spokeOf(t, hub)
			spoke.Spec.Replicas = 6
			return spoke
		}, want: "spec.replicas: Invalid value: 6: gives 2 shards of 1 master and 2 replicas; shards must be at least 3: Redis Cluster needs a majority of at least 3 masters to agree that a master failed"},
		{name: "v1alpha1 replicas of one", spoke: func(*testing.T) *cachev1alpha1.RedisCluster {
			spoke := validSpoke()
			spoke.Spec.Replicas = 1
			return spoke
		}, want: "spec.replicas: Invalid value: 1: gives 1 shards of 1 master and 0 replicas; shards must be at least 3: Redis Cluster needs a majority of at least 3 masters to agree that a master failed"},
		{name: "v1alpha1 replicas beyond the shard maximum", spoke: func(*testing.T) *cachev1alpha1.RedisCluster {
			spoke := validSpoke()
			spoke.Spec.Replicas = 1001
			return spoke
		}, want: "spec.replicas: Invalid value: 1001: gives 1001 shards of 1 master and 0 replicas; shards must be at most 256"},
		{name: "v1alpha1 owned config key", spoke: func(*testing.T) *cachev1alpha1.RedisCluster {
			spoke := validSpoke()
			spoke.Spec.Config["cluster-enabled"] = "no"
			return spoke
		}, want: "spec.config[cluster-enabled]: Forbidden: cluster-enabled is set by the operator: the operator runs every pod in cluster mode with its own nodes.conf on the pod's volume"},
		{name: "v1alpha1 memory value", spoke: func(*testing.T) *cachev1alpha1.RedisCluster {
			spoke := validSpoke()
			spoke.Spec.Config["maxmemory"] = "lots"
			return spoke
		}, want: `spec.config[maxmemory]: Invalid value: "lots": must be a memory size: a whole number of bytes, optionally followed by a unit b, k, kb, m, mb, g or gb (for example 100mb or 1gb)`},
		{name: "v1alpha1 request above limit", spoke: func(*testing.T) *cachev1alpha1.RedisCluster {
			spoke := validSpoke()
			spoke.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
			return spoke
		}, want: `spec.resources.requests[memory]: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi`},
		{name: "v1alpha1 storage class name", spoke: func(*testing.T) *cachev1alpha1.RedisCluster {
			spoke := validSpoke()
			spoke.Spec.StorageClass = "Fast SSD"
			return spoke
		}, want: `spec.storageClass: Invalid value: "Fast SSD": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{name: "v1alpha1 storage class changed", oldSpoke: func(t *testing.T) *cachev1alpha1.RedisCluster { return spokeOf(t, validHub()) },
			spoke: func(t *testing.T) *cachev1alpha1.RedisCluster {
				spoke := spokeOf(t, validHub())
				spoke.Spec.StorageClass = "fast"
				return spoke
			}, want: `spec.storageClass: Invalid value: "fast": is immutable once set (it is "standard"): the volumes already provisioned cannot move to another StorageClass`},
		{name: "v1alpha1 conversion data not JSON", spoke: func(*testing.T) *cachev1alpha1.RedisCluster {
			spoke := validSpoke()
			spoke.Annotations = map[string]string{cachev1alpha1.ConversionDataAnnotation: "{not json"}
			return spoke
		}, want: `metadata.annotations[cache.redis.io/conversion-data]: Invalid value: "{not json": is not the JSON of a v1beta1 spec and status; the conversion writes it: remove it (the v1beta1-only fields then take their defaults) or restore it from the object read through v1beta1`},
		{name: "v1alpha1 conversion data with a half vault source", spoke: func(t *testing.T) *cachev1alpha1.RedisCluster {
			hub := validHub()
			hub.Spec.Auth = vaultAuth()
			hub.Spec.Auth.Vault.Role = ""
			return spokeOf(t, hub)
		}, want: "metadata.annotations[cache.redis.io/conversion-data]: Invalid value: v1beta1 field spec.auth.vault.role: Required value: set role (a role of Vault's Kubernetes auth method) or tokenSecretRef (a Secret holding a Vault token)"},
	}

	v := &Validator{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch {
			case tc.hub != nil:
				obj := validHub()
				tc.hub(obj)
				var old *cachev1beta1.RedisCluster
				if tc.oldHub != nil {
					old = validHub()
					tc.oldHub(old)
				}
				_, err = v.ValidateV1beta1(context.Background(), old, obj)
			default:
				var old *cachev1alpha1.RedisCluster
				if tc.oldSpoke != nil {
					old = tc.oldSpoke(t)
				}
				_, err = v.ValidateV1alpha1(context.Background(), old, tc.spoke(t))
			}
			if err == nil {
				t.Fatalf("accepted; want %s", tc.want)
			}
			got := causes(t, err)
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("causes:\n  %s\nwant exactly:\n  %s", strings.Join(got, "\n  "), tc.want)
			}
		})
	}
	if len(cases) < 40 {
		t.Fatalf("only %d malformed specs; the issue asks for at least 40", len(cases))
	}
}

// TestValidSpecsPass: the valid objects of the table, and their v1alpha1
// forms, pass without warnings.
func TestValidSpecsPass(t *testing.T) {
	v := &Validator{}
	full := validHub()
	full.Spec.ReplicasPerShard = 2
	full.Spec.Auth = vaultAuth()
	full.Spec.Exporter.Enabled = true
	full.Spec.Pod = cachev1beta1.PodSpec{
		Annotations:  map[string]string{"example.com/team": "cache"},
		Labels:       map[string]string{"team": "cache"},
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "redis", Effect: corev1.TaintEffectNoSchedule}},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
		}},
		PriorityClassName: "high-priority",
	}
	full.Spec.Config = map[string]string{
		"maxmemory": "256mb", "maxmemory-policy": "ALLKEYS-LRU", "appendonly": "YES", "save": "3600 1 300 100",
		"client-output-buffer-limit": "replica 256mb 64mb 60 pubsub 32mb 8mb 60", "notify-keyspace-events": "Ex",
		"shutdown-on-sigterm": "nosave now", "rename-command": `FLUSHALL ""`, "cluster-node-timeout": "5000",
		"maxmemory-clients": "5%", "slowlog-log-slower-than": "-1", "latency-tracking-info-percentiles": "50 99 99.9",
	}
	for name, check := range map[string]func() (admission.Warnings, error){
		"v1beta1 minimal":    func() (admission.Warnings, error) { return v.ValidateV1beta1(context.Background(), nil, validHub()) },
		"v1beta1 everything": func() (admission.Warnings, error) { return v.ValidateV1beta1(context.Background(), nil, full) },
		"v1alpha1 fresh":     func() (admission.Warnings, error) { return v.ValidateV1alpha1(context.Background(), nil, validSpoke()) },
		"v1alpha1 from v1beta1": func() (admission.Warnings, error) {
			return v.ValidateV1alpha1(context.Background(), nil, spokeOf(t, full))
		},
	} {
		warnings, err := check()
		if err != nil {
			t.Errorf("%s: rejected: %v", name, err)
		}
		if len(warnings) > 0 {
			t.Errorf("%s: warnings %q", name, warnings)
		}
	}
}

// TestWarnings: risky but allowed specs pass with a warning naming the field.
func TestWarnings(t *testing.T) {
	v := &Validator{}
	shards := func(n int32) *cachev1beta1.RedisCluster {
		rc := validHub()
		rc.Spec.Shards = n
		return rc
	}
	cases := []struct {
		name  string
		check func() (admission.Warnings, error)
		want  string
	}{
		{name: "scale-in of more than half the shards", check: func() (admission.Warnings, error) {
			return v.ValidateV1beta1(context.Background(), shards(8), shards(3))
		}, want: "spec.shards: scaling in from 8 to 3 shards removes 5 at once (more than 50% of them): the remaining masters receive all of their slots and keys, so check that they have the memory for them"},
		{name: "scale-in through v1alpha1", check: func() (admission.Warnings, error) {
			old := spokeOf(t, shards(8))
			obj := spokeOf(t, shards(8))
			obj.Spec.Replicas = 6
			return v.ValidateV1alpha1(context.Background(), old, obj)
		}, want: "spec.replicas: scaling in from 8 to 3 shards removes 5 at once (more than 50% of them): the remaining masters receive all of their slots and keys, so check that they have the memory for them"},
		{name: "scale-in with a stricter fraction", check: func() (admission.Warnings, error) {
			return (&Validator{ScaleInWarningFraction: 0.25}).ValidateV1beta1(context.Background(), shards(8), shards(5))
		}, want: "spec.shards: scaling in from 8 to 5 shards removes 3 at once (more than 25% of them): the remaining masters receive all of their slots and keys, so check that they have the memory for them"},
		{name: "replicas dropped to zero", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.ReplicasPerShard = 0
			return v.ValidateV1beta1(context.Background(), validHub(), rc)
		}, want: "spec.replicasPerShard: going from 1 to 0 replicas per shard: a master lost from now on loses its slots' data"},
		{name: "maxmemory at the memory limit", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Config["maxmemory"] = "512mb"
			return v.ValidateV1beta1(context.Background(), nil, rc)
		}, want: "spec.config[maxmemory]: 512mb is more than 50% of the memory limit of 512Mi (256Mi): the fork of an RDB snapshot, an AOF rewrite or a replica's full sync can double Redis's memory, and with fragmentation and replication buffers the container is killed for running out of memory; leave maxmemory unset to default to that"},
		{name: "maxmemory above the safe share of the limit", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Config["maxmemory"] = "268435457"
			return v.ValidateV1beta1(context.Background(), nil, rc)
		}, want: "spec.config[maxmemory]: 268435457 is more than 50% of the memory limit of 512Mi (256Mi): the fork of an RDB snapshot, an AOF rewrite or a replica's full sync can double Redis's memory, and with fragmentation and replication buffers the container is killed for running out of memory; leave maxmemory unset to default to that"},
		{name: "no maxmemory with a memory limit", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Config["maxmemory"] = "0"
			return v.ValidateV1beta1(context.Background(), nil, rc)
		}, want: "spec.config[maxmemory]: 0 means no limit, with a memory limit of 512Mi: Redis grows until the container is killed for running out of memory instead of evicting keys or refusing writes; leave maxmemory unset to default to 50% of the limit (256Mi)"},
		{name: "storage smaller than two copies of memory", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Storage.Size = ptr.To(resource.MustParse("768Mi"))
			return v.ValidateV1beta1(context.Background(), nil, rc)
		}, want: "spec.storage.size: 768Mi is less than twice the memory limit of 512Mi: an RDB snapshot or an AOF rewrite writes a new copy of the data before it deletes the old one"},
		{name: "parameter of a later Redis", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Config["hide-user-data-from-log"] = "yes"
			return v.ValidateV1beta1(context.Background(), nil, rc)
		}, want: `spec.config[hide-user-data-from-log]: "hide-user-data-from-log" is not a Redis 7.0 parameter; redis-server refuses to start with a directive it does not know, so make sure the image's Redis version has it`},
		{name: "authentication disabled", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Auth = &cachev1beta1.AuthSpec{Disabled: true}
			return v.ValidateV1beta1(context.Background(), nil, rc)
		}, want: "spec.auth.disabled: Redis will run without a password: any client that reaches a pod can read and write every key"},
		{name: "vault over plain http", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.Vault.Address = "http://vault:8200"
			return (&Validator{VaultAddresses: credentials.AddressPolicy{AllowInsecureHTTP: true}}).ValidateV1beta1(context.Background(), nil, rc)
		}, want: "spec.auth.vault.address: http://vault:8200 is plain http: the Vault token and the password cross the network unencrypted"},
		{name: "vault path with the API's data/ prefix", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Auth = vaultAuth()
			rc.Spec.Auth.Vault.Path = "data/redis/prod"
			return v.ValidateV1beta1(context.Background(), nil, rc)
		}, want: `spec.auth.vault.path: "data/redis/prod" starts with data/: give the path inside the mount ("redis/prod"); the operator adds data/ itself`},
		{name: "v1alpha1 update dropping the conversion data", check: func() (admission.Warnings, error) {
			rc := validHub()
			rc.Spec.Auth = vaultAuth()
			old := spokeOf(t, rc)
			obj := old.DeepCopy()
			obj.Annotations = nil
			obj.Spec.Config["maxmemory"] = "128mb"
			return v.ValidateV1alpha1(context.Background(), old, obj)
		}, want: "metadata.annotations[cache.redis.io/conversion-data]: this update removes the annotation that keeps the v1beta1 fields v1alpha1 cannot express (auth, exporter, storage size, pod placement, image, ...): they return to their defaults; update through v1beta1, or keep the annotation, to keep them"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			warnings, err := tc.check()
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if len(warnings) != 1 || warnings[0] != tc.want {
				t.Fatalf("warnings:\n  %s\nwant exactly:\n  %s", strings.Join(warnings, "\n  "), tc.want)
			}
		})
	}
}

// TestUpdatesRatchet: an object stored before a rule existed can still get
// labels, lose its finalizers and be deleted, and keep its claims while it
// is being deleted.
func TestUpdatesRatchet(t *testing.T) {
	v := &Validator{}
	stored := validHub()
	stored.Spec.Config["port"] = "7000"
	relabelled := stored.DeepCopy()
	relabelled.Labels = map[string]string{"team": "cache"}
	if _, err := v.ValidateV1beta1(context.Background(), stored, relabelled); err != nil {
		t.Fatalf("metadata-only update rejected: %v", err)
	}
	// Being deleted, its claims may still be kept (or not), and nothing
	// else may change: a spec written now would never be checked or applied.
	stored.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	keep := stored.DeepCopy()
	keep.Spec.Storage.DeleteClaimPolicy = cachev1beta1.DeleteClaimDelete
	if _, err := v.ValidateV1beta1(context.Background(), stored, keep); err != nil {
		t.Fatalf("deleteClaimPolicy changed on an object being deleted: %v", err)
	}
	deleting := stored.DeepCopy()
	deleting.Spec.Shards = 2
	if _, err := v.ValidateV1beta1(context.Background(), stored, deleting); err == nil ||
		!strings.Contains(err.Error(), "only spec.storage.deleteClaimPolicy can still change") {
		t.Fatalf("spec change of an object being deleted: %v, want refused", err)
	}
	stored.DeletionTimestamp = nil
	// A real spec change is validated in full.
	changed := stored.DeepCopy()
	changed.Spec.Shards = 4
	if _, err := v.ValidateV1beta1(context.Background(), stored, changed); err == nil {
		t.Fatal("spec change of an invalid object accepted")
	}
}

// TestSpokeErrorsKeepV1alpha1Paths: a v1alpha1 object with several problems
// gets all of them, each under its v1alpha1 name, in one Invalid error.
func TestSpokeErrorsKeepV1alpha1Paths(t *testing.T) {
	spoke := validSpoke()
	spoke.Spec.Replicas = 2
	spoke.Spec.StorageClass = "UPPER"
	spoke.Spec.Config["dbfilename"] = "x.rdb"
	_, err := (&Validator{}).ValidateV1alpha1(context.Background(), nil, spoke)
	var fields []string
	for _, c := range causes(t, err) {
		fields = append(fields, strings.SplitN(c, ":", 2)[0])
	}
	want := "spec.replicas spec.config[dbfilename] spec.storageClass"
	if got := strings.Join(fields, " "); got != want {
		t.Fatalf("fields %q, want %q", got, want)
	}
	if !strings.Contains(err.Error(), `RedisCluster.cache.redis.io "cache" is invalid`) {
		t.Fatalf("error %q does not name the object", err)
	}
}

// TestManyErrorsAreCapped: a spec with hundreds of problems gets the first
// fifty and a count of the rest, not a response that grows without bound.
func TestManyErrorsAreCapped(t *testing.T) {
	rc := validHub()
	rc.Spec.Pod.Labels = map[string]string{}
	for i := range 200 {
		rc.Spec.Pod.Labels[fmt.Sprintf("cache.redis.io/l%03d", i)] = "x"
	}
	_, err := (&Validator{}).ValidateV1beta1(context.Background(), nil, rc)
	got := causes(t, err)
	if len(got) != maxErrors+1 || got[maxErrors] != "spec: Forbidden: 150 more errors not shown; fix the ones above first" {
		t.Fatalf("%d causes, last %q", len(got), got[len(got)-1])
	}
}
