package webhooks

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// Bounds the validation enforces beyond the CRD schema. The schema has the
// same shard and replica bounds; they are checked again here because an
// object written through v1alpha1 is checked against the v1alpha1 schema
// only, and its replica count can map to a v1beta1 shape outside them.
const (
	// MinShards is the least number of masters: Redis Cluster needs a
	// majority of masters to agree that a master failed (Redis Cluster
	// specification, "Failure detection"), so fewer than 3 cannot fail over.
	MinShards = 3
	// MaxShards mirrors the CRD schema's maximum of spec.shards.
	MaxShards = 256
	// MaxReplicasPerShard mirrors the CRD schema's maximum of spec.replicasPerShard.
	MaxReplicasPerShard = 5
	// DefaultScaleInWarningFraction is the share of shards that, removed in
	// one change, draws an admission warning: their slots and keys all move
	// to the remaining masters at once.
	DefaultScaleInWarningFraction = 0.5
)

// minStorageSize is the smallest spec.storage.size accepted: a volume holds
// nodes.conf, the RDB snapshot and the AOF of one node; below 64Mi a
// snapshot of a modest dataset no longer fits, and no cloud provider
// provisions disks that small anyway.
var minStorageSize = resource.MustParse("64Mi")

// reservedPodLabels are labels the operator sets on Redis pods to select
// them (StatefulSet selectors, Services, PodDisruptionBudgets) or that
// Kubernetes sets itself; spec.pod.labels may not set them.
var reservedPodLabels = []string{
	"app.kubernetes.io/name",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/component",
	"app.kubernetes.io/managed-by",
	"statefulset.kubernetes.io/pod-name",
	"apps.kubernetes.io/pod-index",
	"controller-revision-hash",
}

// reservedPodLabelPrefix is the operator's own label namespace.
const reservedPodLabelPrefix = "cache.redis.io/"

// warning is an admission warning about one field.
type warning struct {
	field   string
	message string
}

func (w warning) String() string { return w.field + ": " + w.message }

// result collects what validation found.
type result struct {
	errs     field.ErrorList
	warnings []warning
}

func (r *result) add(errs ...*field.Error) { r.errs = append(r.errs, errs...) }

func (r *result) warn(p *field.Path, format string, args ...any) {
	r.warnings = append(r.warnings, warning{field: p.String(), message: fmt.Sprintf(format, args...)})
}

// specOrigin tells validateSpec how to read zero values.
type specOrigin int

const (
	// fromHub: a v1beta1 request, already defaulted by the API server, so an
	// empty field was written empty on purpose.
	fromHub specOrigin = iota
	// fromFreshSpoke: converted from a v1alpha1 object that never held v1beta1
	// fields; the fields v1alpha1 cannot express are empty and the API server
	// fills them with the schema defaults when it reads the object back.
	fromFreshSpoke
)

// validateSpec checks a v1beta1 spec on its own (creation, or any update).
func (v *Validator) validateSpec(spec *cachev1beta1.RedisClusterSpec, origin specOrigin) result {
	var r result
	p := field.NewPath("spec")

	if spec.Shards < MinShards {
		r.add(field.Invalid(p.Child("shards"), spec.Shards, fmt.Sprintf("must be at least %d: Redis Cluster needs a majority of at least 3 masters to agree that a master failed", MinShards)))
	} else if spec.Shards > MaxShards {
		r.add(field.Invalid(p.Child("shards"), spec.Shards, fmt.Sprintf("must be at most %d", MaxShards)))
	}
	if spec.ReplicasPerShard < 0 || spec.ReplicasPerShard > MaxReplicasPerShard {
		r.add(field.Invalid(p.Child("replicasPerShard"), spec.ReplicasPerShard, fmt.Sprintf("must be from 0 to %d", MaxReplicasPerShard)))
	}

	if spec.Image != "" || origin == fromHub {
		r.add(validateImage(spec.Image, p.Child("image"))...)
	}
	for i, s := range spec.ImagePullSecrets {
		r.add(validateObjectName(s.Name, p.Child("imagePullSecrets").Index(i).Child("name"), "the name of a Secret of type kubernetes.io/dockerconfigjson")...)
	}
	r.add(validateResources(&spec.Resources, p.Child("resources"))...)

	validateConfig(spec.Config, p.Child("config"), &r)
	v.warnMaxmemory(spec, p, &r)

	v.validateStorage(&spec.Storage, &spec.Resources, p.Child("storage"), &r)
	if spec.Auth != nil {
		validateAuth(spec.Auth, p.Child("auth"), &r)
	}
	validateUsers(spec.Users, p.Child("users"), &r)
	validateExporter(&spec.Exporter, origin, p.Child("exporter"), &r)
	if spec.NetworkPolicy != nil {
		validateNetworkPolicy(spec.NetworkPolicy, spec.Exporter.Enabled, p.Child("networkPolicy"), &r)
	}
	validatePod(&spec.Pod, p.Child("pod"), &r)
	validatePodExtras(spec, p.Child("pod"), &r)
	validateServices(spec, p, &r)
	return r
}

// validateUpdate checks what may not change between old and new, and warns
// about changes that are allowed but risky.
func (v *Validator) validateUpdate(old, new *cachev1beta1.RedisClusterSpec) result {
	var r result
	p := field.NewPath("spec")

	// Storage class: the CRD's CEL rule says the same for v1beta1 requests;
	// v1alpha1 requests are checked against the v1alpha1 schema only.
	if oldClass := old.Storage.StorageClassName; oldClass != nil {
		newClass := new.Storage.StorageClassName
		if newClass == nil || *newClass != *oldClass {
			value := ""
			if newClass != nil {
				value = *newClass
			}
			r.add(field.Invalid(p.Child("storage", "storageClassName"), value,
				fmt.Sprintf("is immutable once set (it is %q): the volumes already provisioned cannot move to another StorageClass", *oldClass)))
		}
	}

	// Storage size may grow (if the StorageClass allows volume expansion) but
	// never shrink: Kubernetes rejects a smaller request on a bound
	// PersistentVolumeClaim.
	// An unset size (an update through v1alpha1 without conversion data)
	// takes the schema default and is not compared.
	if oldSize, newSize := old.Storage.Size, new.Storage.Size; oldSize != nil && newSize != nil && newSize.Cmp(*oldSize) < 0 {
		r.add(field.Forbidden(p.Child("storage", "size"),
			fmt.Sprintf("may not shrink from %s to %s: Kubernetes cannot shrink a PersistentVolumeClaim", oldSize.String(), newSize.String())))
	}

	validateTLSUpdate(old, new, p.Child("tls"), &r)

	// A restore is chosen with the cluster: the CRD's rule keeps a set
	// bootstrap unchanged (for v1beta1 requests), and here none may appear
	// later either, which would restore a backup into a cluster created
	// without one (and paused, so it never formed).
	if new.Bootstrap != nil && !apiequality.Semantic.DeepEqual(old.Bootstrap, new.Bootstrap) {
		r.add(field.Forbidden(p.Child("bootstrap"), "is set when the RedisCluster is created and cannot be added or changed later; create a new RedisCluster to restore a backup"))
	}

	fraction := v.ScaleInWarningFraction
	if fraction <= 0 {
		fraction = DefaultScaleInWarningFraction
	}
	if removed := old.Shards - new.Shards; removed > 0 && float64(removed) > fraction*float64(old.Shards) {
		r.warn(p.Child("shards"), "scaling in from %d to %d shards removes %d at once (more than %.0f%% of them): the remaining masters receive all of their slots and keys, so check that they have the memory for them",
			old.Shards, new.Shards, removed, fraction*100)
	}
	if old.ReplicasPerShard > 0 && new.ReplicasPerShard == 0 {
		r.warn(p.Child("replicasPerShard"), "going from %d to 0 replicas per shard: a master lost from now on loses its slots' data", old.ReplicasPerShard)
	}
	return r
}

func validateImage(image string, p *field.Path) field.ErrorList {
	if image == "" {
		return field.ErrorList{field.Required(p, "a container image reference such as redis:7.0")}
	}
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return field.ErrorList{field.Invalid(p, image, fmt.Sprintf("must be a container image reference such as redis:7.0 or registry.example.com/redis@sha256:<digest>: %v", err))}
	}
	return nil
}

// validateObjectName checks the name of a namespaced object (a DNS
// subdomain, RFC 1123). what says what it names.
func validateObjectName(name string, p *field.Path, what string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, what)}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, strings.Join(msgs, "; "))}
	}
	return nil
}

// validateResources checks a container's requests and limits the way the
// API server will check the pod (k8s.io/kubernetes pkg/apis/core/validation,
// ValidateResourceRequirements): known or fully-qualified resource names,
// no negative quantity, and no request above its limit. Checking them here
// turns a StatefulSet that would never create its pods into an error on the
// RedisCluster itself.
func validateResources(res *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(list corev1.ResourceList, lp *field.Path) {
		for _, name := range slices.Sorted(maps.Keys(list)) {
			q := list[name]
			np := lp.Key(string(name))
			if !validResourceName(name) {
				errs = append(errs, field.Invalid(np, string(name), "must be cpu, memory, ephemeral-storage, hugepages-<size> or a fully-qualified extended resource name such as example.com/device"))
				continue
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(np, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	check(res.Limits, p.Child("limits"))
	check(res.Requests, p.Child("requests"))
	for _, name := range slices.Sorted(maps.Keys(res.Requests)) {
		request := res.Requests[name]
		limit, ok := res.Limits[name]
		if ok && request.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), request.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validResourceName(name corev1.ResourceName) bool {
	switch {
	case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage:
		return true
	case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		_, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
		return err == nil
	case strings.Contains(string(name), "/"):
		return len(validation.IsQualifiedName(string(name))) == 0
	}
	return false
}

// warnMaxmemory warns when the container has a memory limit and
// spec.config's maxmemory leaves no room below it for a fork's
// copy-on-write, fragmentation and replica buffers: when maxmemory is 0
// (no limit: Redis grows until the kernel kills it) or above
// resources.SafeMaxmemory of the limit (the default the operator renders
// when maxmemory is unset). It only warns: a workload with few writes
// during snapshots may need less room.
func (v *Validator) warnMaxmemory(spec *cachev1beta1.RedisClusterSpec, p *field.Path, r *result) {
	limit, ok := spec.Resources.Limits[corev1.ResourceMemory]
	if !ok || limit.Sign() <= 0 {
		return
	}
	for key, raw := range spec.Config {
		if strings.ToLower(key) != "maxmemory" {
			continue
		}
		n, valid := parseMemory(raw)
		safe := resources.SafeMaxmemory(limit)
		switch {
		case !valid:
		case n == 0:
			r.warn(p.Child("config").Key(key), "%s means no limit, with a memory limit of %s: Redis grows until the container is killed for running out of memory instead of evicting keys or refusing writes; leave maxmemory unset to default to %d%% of the limit (%s)",
				raw, limit.String(), resources.MaxmemoryPercentOfLimit, resource.NewQuantity(safe, resource.BinarySI).String())
		case n > uint64(safe):
			r.warn(p.Child("config").Key(key), "%s is more than %d%% of the memory limit of %s (%s): the fork of an RDB snapshot, an AOF rewrite or a replica's full sync can double Redis's memory, and with fragmentation and replication buffers the container is killed for running out of memory; leave maxmemory unset to default to that",
				raw, resources.MaxmemoryPercentOfLimit, limit.String(), resource.NewQuantity(safe, resource.BinarySI).String())
		}
	}
}

func (v *Validator) validateStorage(storage *cachev1beta1.StorageSpec, res *corev1.ResourceRequirements, p *field.Path, r *result) {
	if storage.StorageClassName != nil && *storage.StorageClassName != "" {
		r.add(validateObjectName(*storage.StorageClassName, p.Child("storageClassName"), "a StorageClass name")...)
	}
	size := storage.Size
	if size == nil {
		// The schema default applies.
		return
	}
	if size.Cmp(minStorageSize) < 0 {
		r.add(field.Invalid(p.Child("size"), size.String(),
			fmt.Sprintf("must be at least %s: the volume holds the node's nodes.conf, RDB snapshot and append-only file", minStorageSize.String())))
		return
	}
	if limit, ok := res.Limits[corev1.ResourceMemory]; ok && limit.Sign() > 0 {
		twice := limit.DeepCopy()
		twice.Add(limit)
		if size.Cmp(twice) < 0 {
			r.warn(p.Child("size"), "%s is less than twice the memory limit of %s: an RDB snapshot or an AOF rewrite writes a new copy of the data before it deletes the old one",
				size.String(), limit.String())
		}
	}
}

// validateAuth names the missing or conflicting piece of an auth source.
func validateAuth(auth *cachev1beta1.AuthSpec, p *field.Path, r *result) {
	switch {
	case auth.SecretRef != nil && auth.Vault != nil:
		r.add(field.Forbidden(p.Child("vault"), "set only one of secretRef or vault"))
	case auth.Disabled && (auth.SecretRef != nil || auth.Vault != nil):
		r.add(field.Forbidden(p.Child("disabled"), "disabled turns authentication off: remove secretRef and vault, or disabled"))
	case auth.Disabled:
		r.warn(p.Child("disabled"), "Redis will run without a password: any client that reaches a pod can read and write every key")
	}
	if ref := auth.SecretRef; ref != nil {
		validateSecretKeySelector(ref, p.Child("secretRef"), "the Secret holding the password", r)
	}
	if vault := auth.Vault; vault != nil {
		validateVault(vault, p.Child("vault"), r)
	}
	checkGracePeriod(auth.RotationGracePeriod, p.Child("rotationGracePeriod"), r)
}

// MaxRotationGracePeriod bounds how long a rotated password stays valid
// beside the new one: a rotation is also how access is revoked, so the
// old password must stop working within a day.
const MaxRotationGracePeriod = 24 * time.Hour

// checkGracePeriod: a rotation grace period is neither negative nor over
// MaxRotationGracePeriod.
func checkGracePeriod(g *metav1.Duration, p *field.Path, r *result) {
	switch {
	case g == nil:
	case g.Duration < 0:
		r.add(field.Invalid(p, g.Duration.String(), "must not be negative"))
	case g.Duration > MaxRotationGracePeriod:
		r.add(field.Invalid(p, g.Duration.String(), fmt.Sprintf("must be at most %s: the old password stays valid that long after a rotation, which is also how access is revoked", MaxRotationGracePeriod)))
	}
}

func validateSecretKeySelector(ref *cachev1beta1.SecretKeySelector, p *field.Path, what string, r *result) {
	r.add(validateObjectName(ref.Name, p.Child("name"), "the name of "+what)...)
	if ref.Key != "" {
		if msgs := validation.IsConfigMapKey(ref.Key); len(msgs) > 0 {
			r.add(field.Invalid(p.Child("key"), ref.Key, strings.Join(msgs, "; ")))
		}
	}
}

func validateVault(vault *cachev1beta1.VaultSource, p *field.Path, r *result) {
	if vault.Address == "" {
		r.add(field.Required(p.Child("address"), "Vault's URL, for example https://vault.vault.svc:8200"))
	} else if u, err := url.Parse(vault.Address); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		r.add(field.Invalid(p.Child("address"), vault.Address, "must be an http or https URL with a host, for example https://vault.vault.svc:8200"))
	}
	path := strings.Trim(vault.Path, "/")
	switch {
	case path == "":
		r.add(field.Required(p.Child("path"), "the secret's path inside the KV v2 mount, for example redis/prod"))
	case strings.HasPrefix(path, "data/") || strings.HasPrefix(path, "metadata/"):
		r.warn(p.Child("path"), "%q starts with %s: give the path inside the mount (%q); the operator adds data/ itself", vault.Path, strings.SplitN(path, "/", 2)[0]+"/", strings.SplitN(path, "/", 2)[1])
	}
	hasRole := strings.TrimSpace(vault.Role) != ""
	switch {
	case !hasRole && vault.TokenSecretRef == nil:
		r.add(field.Required(p.Child("role"), "set role (a role of Vault's Kubernetes auth method) or tokenSecretRef (a Secret holding a Vault token)"))
	case hasRole && vault.TokenSecretRef != nil:
		r.add(field.Forbidden(p.Child("tokenSecretRef"), "set only one of role or tokenSecretRef"))
	}
	if ref := vault.TokenSecretRef; ref != nil {
		validateSecretKeySelector(ref, p.Child("tokenSecretRef"), "the Secret holding the Vault token", r)
	}
	if ref := vault.CASecretRef; ref != nil {
		validateSecretKeySelector(ref, p.Child("caSecretRef"), "the Secret holding Vault's CA bundle", r)
	}
	if vault.ServiceAccountName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(vault.ServiceAccountName) {
			r.add(field.Invalid(p.Child("serviceAccountName"), vault.ServiceAccountName, msg))
		}
	}
	if vault.Version != nil && *vault.Version < 1 {
		r.add(field.Invalid(p.Child("version"), *vault.Version, "must be at least 1 (KV v2 versions start at 1)"))
	}
	if ri := vault.RefreshInterval; ri != nil && ri.Duration <= 0 {
		r.add(field.Invalid(p.Child("refreshInterval"), ri.Duration.String(), "must be positive"))
	}
}

func validateExporter(exp *cachev1beta1.ExporterSpec, origin specOrigin, p *field.Path, r *result) {
	if exp.Enabled && (exp.Image != "" || origin == fromHub) {
		if exp.Image == "" {
			r.add(field.Required(p.Child("image"), "the exporter is enabled: set the redis_exporter image, for example oliver006/redis_exporter:v1.67.0"))
		} else {
			r.add(validateImage(exp.Image, p.Child("image"))...)
		}
	} else if exp.Image != "" {
		r.add(validateImage(exp.Image, p.Child("image"))...)
	}
	r.add(validateResources(&exp.Resources, p.Child("resources"))...)
}

func validatePod(pod *cachev1beta1.PodSpec, p *field.Path, r *result) {
	r.add(apivalidation.ValidateAnnotations(pod.Annotations, p.Child("annotations"))...)
	r.add(metav1validation.ValidateLabels(pod.Labels, p.Child("labels"))...)
	for _, key := range slices.Sorted(maps.Keys(pod.Labels)) {
		if strings.HasPrefix(key, reservedPodLabelPrefix) || slices.Contains(reservedPodLabels, key) {
			r.add(field.Forbidden(p.Child("labels").Key(key), "the operator or Kubernetes sets this label on the Redis pods to select them"))
		}
	}
	r.add(metav1validation.ValidateLabels(pod.NodeSelector, p.Child("nodeSelector"))...)
	if pod.PriorityClassName != "" {
		r.add(validateObjectName(pod.PriorityClassName, p.Child("priorityClassName"), "a PriorityClass name")...)
	}
	for i := range pod.Tolerations {
		validateToleration(&pod.Tolerations[i], p.Child("tolerations").Index(i), r)
	}
	for i := range pod.TopologySpreadConstraints {
		validateSpread(&pod.TopologySpreadConstraints[i], p.Child("topologySpreadConstraints").Index(i), r)
	}
	if pod.Affinity != nil {
		validateAffinity(pod.Affinity, p.Child("affinity"), r)
	}
}

// validateToleration applies the rules the API server applies to a pod's
// tolerations (Kubernetes API reference, Toleration).
func validateToleration(t *corev1.Toleration, p *field.Path, r *result) {
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			r.add(field.Invalid(p.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			r.add(field.Invalid(p.Child("operator"), string(t.Operator), "must be Exists when key is empty (an empty key with Exists tolerates every taint)"))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			r.add(field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		r.add(field.NotSupported(p.Child("operator"), string(t.Operator), []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		r.add(field.NotSupported(p.Child("effect"), string(t.Effect), []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		r.add(field.Invalid(p.Child("effect"), string(t.Effect), "must be NoExecute when tolerationSeconds is set"))
	}
}

// validateSpread applies the API server's rules for a topology spread
// constraint (Kubernetes API reference, TopologySpreadConstraint).
func validateSpread(c *corev1.TopologySpreadConstraint, p *field.Path, r *result) {
	if c.MaxSkew < 1 {
		r.add(field.Invalid(p.Child("maxSkew"), c.MaxSkew, "must be at least 1"))
	}
	if c.TopologyKey == "" {
		r.add(field.Required(p.Child("topologyKey"), "a node label key such as topology.kubernetes.io/zone"))
	} else {
		for _, msg := range validation.IsQualifiedName(c.TopologyKey) {
			r.add(field.Invalid(p.Child("topologyKey"), c.TopologyKey, msg))
		}
	}
	switch c.WhenUnsatisfiable {
	case corev1.DoNotSchedule, corev1.ScheduleAnyway:
	default:
		r.add(field.NotSupported(p.Child("whenUnsatisfiable"), string(c.WhenUnsatisfiable), []string{string(corev1.DoNotSchedule), string(corev1.ScheduleAnyway)}))
	}
	if c.MinDomains != nil {
		if *c.MinDomains < 1 {
			r.add(field.Invalid(p.Child("minDomains"), *c.MinDomains, "must be at least 1"))
		} else if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			r.add(field.Invalid(p.Child("minDomains"), *c.MinDomains, "may only be set when whenUnsatisfiable is DoNotSchedule"))
		}
	}
	if c.LabelSelector != nil {
		r.add(metav1validation.ValidateLabelSelector(c.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
	}
}

// validateAffinity checks what the API server would reject in a pod's
// affinity: empty topology keys of pod (anti-)affinity terms, weights
// outside 1..100, a required node affinity without terms, and malformed
// label selectors.
func validateAffinity(a *corev1.Affinity, p *field.Path, r *result) {
	if na := a.NodeAffinity; na != nil {
		np := p.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil && len(req.NodeSelectorTerms) == 0 {
			r.add(field.Required(np.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"), "at least one node selector term"))
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			if t.Weight < 1 || t.Weight > 100 {
				r.add(field.Invalid(np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i).Child("weight"), t.Weight, "must be from 1 to 100"))
			}
		}
	}
	podTerms := func(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, pp *field.Path) {
		for i := range required {
			validatePodAffinityTerm(&required[i], pp.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i), r)
		}
		for i := range preferred {
			wp := pp.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if w := preferred[i].Weight; w < 1 || w > 100 {
				r.add(field.Invalid(wp.Child("weight"), w, "must be from 1 to 100"))
			}
			validatePodAffinityTerm(&preferred[i].PodAffinityTerm, wp.Child("podAffinityTerm"), r)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		podTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAffinity"))
	}
	if pa := a.PodAntiAffinity; pa != nil {
		podTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAntiAffinity"))
	}
}

func validatePodAffinityTerm(t *corev1.PodAffinityTerm, p *field.Path, r *result) {
	if t.TopologyKey == "" {
		r.add(field.Required(p.Child("topologyKey"), "a node label key such as kubernetes.io/hostname"))
	} else {
		for _, msg := range validation.IsQualifiedName(t.TopologyKey) {
			r.add(field.Invalid(p.Child("topologyKey"), t.TopologyKey, msg))
		}
	}
	if t.LabelSelector != nil {
		r.add(metav1validation.ValidateLabelSelector(t.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
	}
}
