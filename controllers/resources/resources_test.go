package resources

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
)

// cluster returns a RedisCluster as the API server stores it after the
// CRD's schema defaults.
func cluster(mutate ...func(*cachev1beta1.RedisCluster)) *cachev1beta1.RedisCluster {
	size := resource.MustParse("1Gi")
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "prod", UID: types.UID("uid-1"), Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{
			Shards:           3,
			ReplicasPerShard: 1,
			Image:            "redis:7.0",
			ImagePullPolicy:  corev1.PullIfNotPresent,
			Storage:          cachev1beta1.StorageSpec{Size: &size, DeleteClaimPolicy: cachev1beta1.DeleteClaimRetain},
			Exporter:         cachev1beta1.ExporterSpec{Image: "oliver006/redis_exporter:v1.67.0"},
			LostShardPolicy:  cachev1beta1.LostShardWait,
		},
	}
	for _, m := range mutate {
		m(rc)
	}
	return rc
}

func TestNames(t *testing.T) {
	if got := StatefulSetName("cache", 2); got != "cache-shard-2" {
		t.Errorf("StatefulSetName = %q", got)
	}
	if got := PodName("cache", 2, 1); got != "cache-shard-2-1" {
		t.Errorf("PodName = %q", got)
	}
	if got := PVCName("cache", 0, 1); got != "data-cache-shard-0-1" {
		t.Errorf("PVCName = %q", got)
	}
	for _, tc := range []struct {
		name    string
		shard   int
		ok      bool
		rc      string
		podName string
		ordinal int
		podOK   bool
	}{
		{name: "cache-shard-0", shard: 0, ok: true, rc: "cache", podName: "cache-shard-0-1", ordinal: 1, podOK: true},
		{name: "cache-shard-12", shard: 12, ok: true, rc: "cache", podName: "cache-shard-12-0", ordinal: 0, podOK: true},
		{name: "cache-shard-012", rc: "cache", podName: "cache-shard-1-01"},
		{name: "cache-shard-x", rc: "cache", podName: "cache-shard-1"},
		{name: "other-shard-1", rc: "cache", podName: "other-shard-1-0"},
		// A cluster whose name is a prefix of another's does not claim its shards.
		{name: "cache-shard-1", rc: "cache-shard", podName: "cache-shard-1-0"},
	} {
		shard, ok := ShardIndex(tc.rc, tc.name)
		if ok != tc.ok || shard != tc.shard {
			t.Errorf("ShardIndex(%q, %q) = %d, %v; want %d, %v", tc.rc, tc.name, shard, ok, tc.shard, tc.ok)
		}
		s, o, ok := PodOrdinal(tc.rc, tc.podName)
		if ok != tc.podOK || (ok && o != tc.ordinal) {
			t.Errorf("PodOrdinal(%q, %q) = %d, %d, %v; want ordinal %d, %v", tc.rc, tc.podName, s, o, ok, tc.ordinal, tc.podOK)
		}
	}
}

func TestStatefulSetShape(t *testing.T) {
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.ReplicasPerShard = 2
		rc.Spec.Storage.StorageClassName = ptr.To("fast")
		q := resource.MustParse("5Gi")
		rc.Spec.Storage.Size = &q
		rc.Spec.Pod.Labels = map[string]string{"team": "payments", LabelShard: "spoofed"}
		rc.Spec.Pod.Annotations = map[string]string{"example.com/a": "b"}
	})
	sts := StatefulSet(rc, 1, Placement{})

	if sts.Name != "cache-shard-1" || sts.Namespace != "prod" {
		t.Errorf("name %s/%s", sts.Namespace, sts.Name)
	}
	if *sts.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 1 master + 2 replicas", *sts.Spec.Replicas)
	}
	if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("update strategy %s, want OnDelete", sts.Spec.UpdateStrategy.Type)
	}
	if sts.Spec.ServiceName != "cache-headless" {
		t.Errorf("serviceName %q", sts.Spec.ServiceName)
	}
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("claim retention %+v", p)
	}
	assertOwner(t, sts.OwnerReferences)

	sel := sts.Spec.Selector.MatchLabels
	want := map[string]string{LabelName: "redis", LabelInstance: "cache", LabelCluster: "cache", LabelShard: "1"}
	if !maps.Equal(sel, want) {
		t.Errorf("selector %v, want %v", sel, want)
	}
	tl := sts.Spec.Template.Labels
	for k, v := range sel {
		if tl[k] != v {
			t.Errorf("template label %s=%q, selector wants %q", k, tl[k], v)
		}
	}
	if tl["team"] != "payments" || tl[LabelManagedBy] != "redis-operator" || tl[LabelComponent] != "redis" {
		t.Errorf("template labels %v", tl)
	}
	ta := sts.Spec.Template.Annotations
	if ta["example.com/a"] != "b" || ta[TemplateHashAnnotation] != TemplateHash(rc, 1, Placement{}) {
		t.Errorf("template annotations %v", ta)
	}
	if sts.Annotations[AppliedHashAnnotation] == "" {
		t.Error("no applied hash")
	}

	vct := sts.Spec.VolumeClaimTemplates
	if len(vct) != 1 || vct[0].Name != DataVolumeName || *vct[0].Spec.StorageClassName != "fast" ||
		!vct[0].Spec.Resources.Requests.Storage().Equal(resource.MustParse("5Gi")) || vct[0].Labels[LabelShard] != "1" {
		t.Errorf("volume claim templates %+v", vct)
	}

	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("containers %d, want 1 without the exporter", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "redis:7.0" || c.Command[0] != "sh" || !strings.Contains(c.Command[2], "exec redis-server /data/redis.conf") {
		t.Errorf("container %s %v", c.Image, c.Command)
	}
	if !strings.Contains(c.Command[2], `--cluster-announce-ip "$POD_IP"`) {
		t.Error("cluster-announce-ip is not the pod IP")
	}
	if c.Env[0].Name != "POD_IP" || c.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env %+v", c.Env)
	}
	if c.ReadinessProbe.Exec == nil || c.LivenessProbe.TCPSocket == nil || c.Lifecycle.PreStop.Exec == nil {
		t.Error("probes or preStop missing")
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for path, ro := range map[string]bool{"/data": false, "/tmp": false, "/etc/redis": true, "/etc/redis-auth": true} {
		m, ok := mounts[path]
		if !ok || m.ReadOnly != ro {
			t.Errorf("mount %s: %+v (present %v), want readOnly %v", path, m, ok, ro)
		}
	}
	// No password in the pod spec at all: not in args, not in env values.
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("redis container reads a secret into env %s", e.Name)
		}
	}
	aff := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if len(aff) != 2 || !maps.Equal(aff[0].PodAffinityTerm.LabelSelector.MatchLabels, want) {
		t.Errorf("default anti-affinity %+v", aff)
	}
	if *pod.AutomountServiceAccountToken {
		t.Error("service account token mounted")
	}
}

func TestStatefulSetExporterAndAffinity(t *testing.T) {
	custom := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Exporter.Enabled = true
		rc.Spec.Pod.Affinity = custom
	})
	pod := StatefulSet(rc, 0, Placement{}).Spec.Template.Spec
	if len(pod.Containers) != 2 || pod.Containers[1].Name != ExporterContainerName || pod.Containers[1].Image != "oliver006/redis_exporter:v1.67.0" {
		t.Fatalf("containers %+v", pod.Containers)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range pod.Containers[1].Env {
		env[e.Name] = e
	}
	// Its own user and password, which no rotation of spec.auth changes.
	if env["REDIS_ADDR"].Value != "redis://$(POD_IP):6379" || env["REDIS_USER"].Value != acl.ExporterUser ||
		env["REDIS_PASSWORD"].ValueFrom.SecretKeyRef.Name != "cache-exporter" || env["REDIS_EXPORTER_CONFIG_COMMAND"].Value != "-" {
		t.Errorf("exporter env %+v", env)
	}
	// A new exporter password (a new Secret UID) changes the template: the pods roll.
	u1, u2 := StatefulSet(rc, 0, Placement{ExporterSecretUID: "u1"}), StatefulSet(rc, 0, Placement{ExporterSecretUID: "u2"})
	if u1.Spec.Template.Annotations[ExporterSecretAnnotation] != "u1" ||
		u1.Spec.Template.Annotations[TemplateHashAnnotation] == u2.Spec.Template.Annotations[TemplateHashAnnotation] {
		t.Errorf("exporter Secret UID in the template: %v", u1.Spec.Template.Annotations)
	}
	if pod.Affinity.NodeAffinity == nil || len(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 2 {
		t.Errorf("spec.pod.affinity does not add to the default: %+v", pod.Affinity)
	}
	if svc := HeadlessService(rc); len(svc.Spec.Ports) != 3 || svc.Spec.Ports[2].Port != ExporterPort {
		t.Errorf("headless ports %+v", svc.Spec.Ports)
	}
}

// TestPodSecurityRestricted runs Kubernetes' own Pod Security admission
// checks (k8s.io/pod-security-admission) at the "restricted" level, latest
// version, on the pod template, with and without the exporter.
func TestPodSecurityRestricted(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		t.Fatal(err)
	}
	lv := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	// Control: a bare pod is forbidden, so the evaluator really checks.
	bare := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "redis:7.0"}}}
	if policy.AggregateCheckResults(eval.EvaluatePod(lv, &metav1.ObjectMeta{}, &bare)).Allowed {
		t.Fatal("restricted allows a pod with no security context")
	}
	for _, exporter := range []bool{false, true} {
		rc := cluster(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Exporter.Enabled = exporter })
		tpl := StatefulSet(rc, 0, Placement{}).Spec.Template
		res := policy.AggregateCheckResults(eval.EvaluatePod(lv, &tpl.ObjectMeta, &tpl.Spec))
		if !res.Allowed {
			t.Errorf("exporter=%v: restricted forbids the pod: %s: %s", exporter, res.ForbiddenReason(), res.ForbiddenDetail())
		}
		for _, c := range tpl.Spec.Containers {
			if !*c.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("container %s: root filesystem writable", c.Name)
			}
		}
		if *tpl.Spec.SecurityContext.RunAsUser != 999 || *tpl.Spec.SecurityContext.FSGroup != 999 {
			t.Errorf("pod security context %+v", tpl.Spec.SecurityContext)
		}
	}
}

func TestTemplateHash(t *testing.T) {
	base := TemplateHash(cluster(), 0, Placement{})
	for _, tc := range []struct {
		name    string
		mutate  func(*cachev1beta1.RedisCluster)
		changes bool
	}{
		{"cluster label", func(rc *cachev1beta1.RedisCluster) { rc.Labels = map[string]string{"a": "b"} }, false},
		{"cluster annotation", func(rc *cachev1beta1.RedisCluster) { rc.Annotations = map[string]string{"a": "b"} }, false},
		{"generation", func(rc *cachev1beta1.RedisCluster) { rc.Generation = 7 }, false},
		{"shards", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 5 }, false},
		{"replicas per shard", func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 2 }, false},
		{"paused", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Paused = true }, false},
		{"live key maxmemory-policy", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Config = map[string]string{"maxmemory-policy": "allkeys-lru"}
		}, false},
		{"live key in upper case", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config = map[string]string{"MAXMEMORY": "1gb"} }, false},
		{"deleteClaimPolicy", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Storage.DeleteClaimPolicy = cachev1beta1.DeleteClaimDelete
		}, false},
		{"image", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Image = "redis:7.0.15" }, true},
		{"restart-only key", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config = map[string]string{"databases": "1"} }, true},
		{"resources", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, true},
		{"pod annotation", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Pod.Annotations = map[string]string{"a": "b"} }, true},
		{"exporter", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Exporter.Enabled = true }, true},
	} {
		got := TemplateHash(cluster(tc.mutate), 0, Placement{})
		if (got != base) != tc.changes {
			t.Errorf("%s: hash changed = %v, want %v", tc.name, got != base, tc.changes)
		}
	}
}

// TestAppliedHashIgnoresClusterMetadata: the objects built for a cluster
// whose own labels and annotations changed are identical, so the
// controller sends no write (the field report: an annotation caused an
// endless StatefulSet update loop in another operator).
func TestAppliedHashIgnoresClusterMetadata(t *testing.T) {
	a := cluster()
	b := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Labels = map[string]string{"env": "prod"}
		rc.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "x"}
		rc.ResourceVersion = "42"
	})
	pairs := [][2]metav1.Object{
		{StatefulSet(a, 0, Placement{}), StatefulSet(b, 0, Placement{})},
		{ConfigMap(a), ConfigMap(b)},
		{HeadlessService(a), HeadlessService(b)},
		{ClientService(a), ClientService(b)},
		{PodDisruptionBudget(a, 0), PodDisruptionBudget(b, 0)},
	}
	for _, p := range pairs {
		if p[0].GetAnnotations()[AppliedHashAnnotation] != p[1].GetAnnotations()[AppliedHashAnnotation] {
			t.Errorf("%s: applied hash differs", p[0].GetName())
		}
	}
	if StatefulSet(a, 0, Placement{}).Annotations[AppliedHashAnnotation] == StatefulSet(cluster(func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 2 }), 0, Placement{}).Annotations[AppliedHashAnnotation] {
		t.Error("applied hash ignores replicasPerShard")
	}
}

func TestServicesAndPDB(t *testing.T) {
	rc := cluster()
	h := HeadlessService(rc)
	if h.Name != "cache-headless" || h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses {
		t.Errorf("headless %+v", h.Spec)
	}
	c := ClientService(rc)
	if c.Name != "cache" || c.Spec.Type != corev1.ServiceTypeClusterIP || len(c.Spec.Ports) != 1 || c.Spec.Ports[0].Port != 6379 {
		t.Errorf("client %+v", c.Spec)
	}
	for _, svc := range []*corev1.Service{h, c} {
		assertOwner(t, svc.OwnerReferences)
		if !maps.Equal(svc.Spec.Selector, ClusterSelector("cache")) {
			t.Errorf("%s selector %v", svc.Name, svc.Spec.Selector)
		}
	}
	pdb := PodDisruptionBudget(rc, 2)
	if pdb.Name != "cache-shard-2" || pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels[LabelShard] != "2" {
		t.Errorf("pdb %+v", pdb.Spec)
	}
	assertOwner(t, pdb.OwnerReferences)
	// Without replicas the master is the only copy: a drain must not evict it.
	alone := PodDisruptionBudget(cluster(func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 0 }), 2)
	if alone.Spec.MaxUnavailable != nil || alone.Spec.MinAvailable == nil || alone.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("pdb without replicas %+v, want minAvailable 1", alone.Spec)
	}
}

func TestRenderConfig(t *testing.T) {
	rc := cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Config = map[string]string{"maxmemory-policy": "allkeys-lru", "appendonly": "no", "notify-keyspace-events": "", "databases": "1"}
	})
	conf := ConfigMap(rc).Data[ConfigKey]
	lines := strings.Split(strings.TrimSpace(conf), "\n")
	for _, want := range []string{
		"cluster-enabled yes", "cluster-config-file /data/nodes.conf", "dir /data", "port 6379",
		"maxmemory-policy allkeys-lru", "appendonly no", `notify-keyspace-events ""`, "databases 1",
		"cluster-allow-replica-migration no", "cluster-node-timeout 5000",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("redis.conf lacks %q:\n%s", want, conf)
		}
	}
	if slices.Contains(lines, "appendonly yes") {
		t.Error("spec.config does not override the operator default")
	}
	if lines[len(lines)-1] != "include /etc/redis-auth/auth.conf" {
		t.Errorf("the auth include is not last: %q", lines[len(lines)-1])
	}
	live, restart := LiveConfig(rc), RestartConfig(rc)
	if live["maxmemory-policy"] != "allkeys-lru" || live["cluster-node-timeout"] != "5000" || restart["databases"] != "1" {
		t.Errorf("live %v restart %v", live, restart)
	}
	if _, ok := restart["maxmemory-policy"]; ok {
		t.Error("live key counted as restart-only")
	}
}

func TestLiveConfigToApply(t *testing.T) {
	got := LiveConfigToApply(map[string]string{"maxmemory": "1gb"}, []string{"maxmemory", "maxmemory-policy", "unknown-key"})
	want := map[string]string{"maxmemory": "1gb", "maxmemory-policy": "noeviction"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestValidateConfig(t *testing.T) {
	for _, tc := range []struct {
		config map[string]string
		errHas string
	}{
		{config: map[string]string{"maxmemory": "1gb", "save": "900 1 300 10"}},
		{config: map[string]string{"port": "7000"}, errHas: `"port" is set by the operator`},
		{config: map[string]string{"Cluster-Enabled": "no"}, errHas: `"Cluster-Enabled" is set by the operator`},
		{config: map[string]string{"requirepass": "x"}, errHas: "requirepass"},
		{config: map[string]string{"include": "/etc/other.conf"}, errHas: "include"},
		{config: map[string]string{"maxmemory": "1gb\nrequirepass x"}, errHas: "line break"},
		{config: map[string]string{"max memory": "1"}, errHas: "not a redis.conf parameter name"},
		{config: map[string]string{"": "1"}, errHas: "not a redis.conf parameter name"},
		{config: map[string]string{"maxmemory": "1", "MAXMEMORY": "2"}, errHas: "name the same parameter"},
		{config: map[string]string{"loadmodule": "/tmp/x.so"}, errHas: `"loadmodule" is refused`},
		{config: map[string]string{"enable-debug-command": "yes"}, errHas: `"enable-debug-command" may only be "no"`},
		{config: map[string]string{"Enable-Module-Command": "local"}, errHas: `"Enable-Module-Command" may only be "no"`},
		{config: map[string]string{"enable-protected-configs": "local"}, errHas: `may only be "no"`},
		{config: map[string]string{"enable-debug-command": "no", "enable-module-command": "NO", "enable-protected-configs": "no"}},
	} {
		err := ValidateConfig(tc.config)
		switch {
		case tc.errHas == "" && err != nil:
			t.Errorf("%v: unexpected error %v", tc.config, err)
		case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("%v: error %v, want one containing %q", tc.config, err, tc.errHas)
		}
	}
}

func TestSecret(t *testing.T) {
	rc := cluster()
	s := Secret(rc, "")
	if _, ok := s.Data[PasswordKey]; ok || !strings.HasPrefix(string(s.Data[AuthConfKey]), "#") {
		t.Errorf("no-auth secret %q", s.Data)
	}
	s = Secret(rc, `p"w\d`)
	if string(s.Data[PasswordKey]) != `p"w\d` {
		t.Errorf("password %q", s.Data[PasswordKey])
	}
	if got, want := string(s.Data[AuthConfKey]), "requirepass \"p\\x22w\\x5cd\"\nmasterauth \"p\\x22w\\x5cd\"\n"; got != want {
		t.Errorf("auth.conf %q, want %q", got, want)
	}
	if s.Name != "cache-auth" {
		t.Errorf("name %s", s.Name)
	}
	assertOwner(t, s.OwnerReferences)
}

func assertOwner(t *testing.T, refs []metav1.OwnerReference) {
	t.Helper()
	if len(refs) != 1 || refs[0].UID != "uid-1" || refs[0].Kind != "RedisCluster" || refs[0].APIVersion != "cache.redis.io/v1beta1" || !*refs[0].Controller {
		t.Errorf("owner references %+v", refs)
	}
}

// TestMaxmemoryDefault: with a memory limit and no maxmemory in
// spec.config, redis.conf and the live config both set maxmemory to half
// the limit; an explicit maxmemory (any case) wins; no limit, no default.
func TestMaxmemoryDefault(t *testing.T) {
	withLimit := func(limit string, config map[string]string) *cachev1beta1.RedisCluster {
		return cluster(func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Config = config
			if limit != "" {
				rc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}
			}
		})
	}
	for _, tc := range []struct {
		name string
		rc   *cachev1beta1.RedisCluster
		want string // "" for no maxmemory line
	}{
		{name: "limit, no maxmemory", rc: withLimit("1Gi", nil), want: "536870912"},
		{name: "decimal limit", rc: withLimit("3G", nil), want: "1500000000"},
		{name: "explicit maxmemory wins", rc: withLimit("1Gi", map[string]string{"maxmemory": "900mb"}), want: "900mb"},
		{name: "explicit in upper case wins", rc: withLimit("1Gi", map[string]string{"MAXMEMORY": "0"}), want: "0"},
		{name: "no limit", rc: withLimit("", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := RenderConfig(tc.rc)
			live, hasLive := LiveConfig(tc.rc)["maxmemory"]
			if tc.want == "" {
				if strings.Contains(conf, "\nmaxmemory ") || hasLive {
					t.Errorf("maxmemory set without a limit: live %q, conf:\n%s", live, conf)
				}
				return
			}
			if !strings.Contains(conf, "\nmaxmemory "+tc.want+"\n") {
				t.Errorf("redis.conf lacks maxmemory %s:\n%s", tc.want, conf)
			}
			if live != tc.want {
				t.Errorf("live maxmemory %q, want %q", live, tc.want)
			}
		})
	}
}

// TestStartupProbeCoversHandover: the startup probe lets the start
// script's handover wait its whole handoverMaxWaitMs, with half a minute to
// spare, before the kubelet would restart the container.
func TestStartupProbeCoversHandover(t *testing.T) {
	wait, err := strconv.Atoi(handoverMaxWaitMs)
	if err != nil {
		t.Fatal(err)
	}
	p := redisContainer(cluster()).StartupProbe
	if p == nil || p.TCPSocket == nil || p.TCPSocket.Port.IntValue() != RedisPort {
		t.Fatalf("startup probe %+v, want a TCP check of port %d", p, RedisPort)
	}
	if budget := int(p.PeriodSeconds*p.FailureThreshold) * 1000; budget < wait+30_000 {
		t.Errorf("startup probe allows %d ms, the handover may wait %d ms", budget, wait)
	}
}
