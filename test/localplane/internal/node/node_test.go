package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/redis-operator/redis-operator/test/localplane/internal/expand"
)

func TestLookupImageArgv(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"redis-operator", "redis-operator-beab2f5"} {
		if err := os.WriteFile(filepath.Join(bin, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		image         string
		command, args []string
		want          []string
		wantErr       string
	}{
		{image: "redis:7.0", want: []string{redisServer}},
		{image: "docker.io/library/redis:7.0.15@sha256:abc", args: []string{"/etc/redis/redis.conf", "--port", "7000"},
			want: []string{redisServer, "/etc/redis/redis.conf", "--port", "7000"}},
		{image: "redis", args: []string{"--appendonly", "yes"}, want: []string{redisServer, "--appendonly", "yes"}},
		{image: "bitnami/redis:7.2", command: []string{"redis-server", "/etc/redis/redis.conf"},
			want: []string{redisServer, "/etc/redis/redis.conf"}},
		{image: "valkey/valkey:8.0", args: []string{"/data/valkey.conf"}, want: []string{redisServer, "/data/valkey.conf"}},
		{image: "redis:7.0", command: []string{"sh", "-c", "exit 0"}, want: []string{"/usr/bin/sh", "-c", "exit 0"}},
		{image: "oliver006/redis_exporter:v1.62.0", args: []string{"--redis.addr=redis://127.64.0.2:6379"},
			want: []string{"/usr/bin/prometheus-redis-exporter", "--redis.addr=redis://127.64.0.2:6379"}},
		{image: "ghcr.io/redis-operator/redis-operator:v0.2.0", command: []string{"/redis-operator"}, args: []string{"--leader-elect"},
			want: []string{filepath.Join(bin, "redis-operator"), "--leader-elect"}},
		{image: "ghcr.io/redis-operator/redis-operator:beab2f5", command: []string{"/redis-operator"},
			want: []string{filepath.Join(bin, "redis-operator-beab2f5")}},
		{image: "ghcr.io/redis-operator/redis-operator:v0.1.0@sha256:abc", want: []string{filepath.Join(bin, "redis-operator")}},
		{image: "nginx:1.27", wantErr: "no local stand-in"},
		{image: "registry:5000/redis-stack:7", wantErr: "no local stand-in"},
		{image: "redis:7.0", command: []string{"no-such-tool-here"}, wantErr: "no local stand-in"},
	}
	for _, c := range cases {
		im, err := LookupImage(c.image, bin)
		var got []string
		if err == nil {
			got, err = im.Argv(c.command, c.args)
		}
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s %v %v: error %v, want one containing %q", c.image, c.command, c.args, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %v %v: %v", c.image, c.command, c.args, err)
			continue
		}
		// sh resolves through PATH, which may find /bin/sh or /usr/bin/sh.
		if filepath.Base(got[0]) == "sh" {
			got[0] = "/usr/bin/sh"
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %v %v: argv %q, want %q", c.image, c.command, c.args, got, c.want)
		}
	}
}

func TestContainerEnv(t *testing.T) {
	optional := true
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"MODE": "cluster", "bad-name": "x"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "auth", Namespace: "ns"}, Data: map[string][]byte{"password": []byte("s3cret")}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	cms, secrets := factory.Core().V1().ConfigMaps(), factory.Core().V1().Secrets()
	cms.Informer()
	secrets.Informer()
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())

	r := &envResolver{configMaps: cms.Lister(), secrets: secrets.Lister(), apiHost: "127.0.0.1", apiPort: 6443, nodeName: "localplane", hostIP: "127.0.0.1"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-0", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "redis"}},
		Spec:       corev1.PodSpec{ServiceAccountName: "sa"},
	}
	c := &corev1.Container{
		EnvFrom: []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		Env: []corev1.EnvVar{
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "ADDR", Value: "$(POD_IP):6379"},
			{Name: "LATER", Value: "$(DEFINED_AFTER)"},
			{Name: "DEFINED_AFTER", Value: "x"},
			{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "auth"}, Key: "password"}}},
			{Name: "MISSING", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: &optional}}},
			{Name: "MEM_MB", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
				Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1536Mi")}},
	}
	e, err := r.containerEnv(pod, c, "127.64.1.2")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"POD_IP": "127.64.1.2", "POD_NAME": "redis-0", "NS": "ns", "APP": "redis",
		"ADDR": "127.64.1.2:6379", "LATER": "$(DEFINED_AFTER)", "PASSWORD": "s3cret", "MEM_MB": "1536",
		"CFG_MODE": "cluster", "CFG_bad-name": "x", "HOSTNAME": "redis-0", "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443",
	}
	for k, v := range want {
		if e.values[k] != v {
			t.Errorf("%s = %q, want %q", k, e.values[k], v)
		}
	}
	if _, ok := e.values["MISSING"]; ok {
		t.Error("MISSING (an optional key of a missing secret) is set, want it absent")
	}

	// Probe commands see only static values, as with the kubelet.
	got := expand.All([]string{"redis-cli", "-h", "$(POD_IP)", "$(DEFINED_AFTER)"}, staticEnv(c))
	if !slices.Equal(got, []string{"redis-cli", "-h", "", "x"}) {
		t.Errorf("probe command expands to %q", got)
	}

	if _, err := r.containerEnv(pod, &corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "absent"}}}}}, "127.64.1.2"); err == nil {
		t.Error("a missing mandatory configmap key gave no error")
	}
}

func TestWriteVolume(t *testing.T) {
	dir := t.TempDir()
	gid := int64(4242)
	if err := writeVolume(dir, map[string]file{"a": {data: []byte("1"), mode: 0o644}, "sub/b": {data: []byte("2"), mode: 0o600}}, &gid); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "sub", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 || statGid(st) != 4242 {
		t.Errorf("sub/b has mode %v gid %d, want 0640 and fsGroup 4242", st.Mode().Perm(), statGid(st))
	}
	if err := writeVolume(dir, map[string]file{"a": {data: []byte("changed"), mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "changed" {
		t.Errorf("a = %q, want the new content", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("sub/ should be gone with its only key: %v", err)
	}
	if err := writeVolume(dir, map[string]file{"../escape": {data: nil, mode: 0o644}}, nil); err == nil {
		t.Error("a path outside the volume was accepted")
	}
}

func TestShadowDirs(t *testing.T) {
	root := t.TempDir()
	// t.TempDir makes its directories 0700; let others traverse them.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	closed := filepath.Join(root, "etc", "redis") // like Debian's /etc/redis (0750)
	open := filepath.Join(root, "opt")
	for _, d := range []string{closed, open} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(closed, 0o750); err != nil {
		t.Fatal(err)
	}
	uid := int64(999)
	mounts := []mountSpec{
		{src: "/state/cfg", dst: filepath.Join(closed, "conf", "redis.conf")},
		{src: "/state/data", dst: filepath.Join(open, "data")},
	}
	if got := shadowDirs(mounts, identity{uid: &uid, gid: &uid}); !slices.Equal(got, []string{closed}) {
		t.Errorf("shadowDirs as uid 999 gid 999 = %q, want [%s]", got, closed)
	}
	if got := shadowDirs(mounts, identity{}); len(got) != 0 {
		t.Errorf("shadowDirs as root = %q, want none", got)
	}
	gid := int64(0)
	if got := shadowDirs(mounts, identity{uid: &uid, gid: &gid}); len(got) != 0 {
		t.Errorf("shadowDirs as uid 999 in group 0 (the directory's group) = %q, want none", got)
	}
}

func TestContainerIdentity(t *testing.T) {
	user, group, fs, other := int64(1000), int64(2000), int64(3000), int64(999)
	yes := true
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{
		RunAsUser: &user, RunAsGroup: &group, FSGroup: &fs, SupplementalGroups: []int64{3000, 5},
	}}}
	id, err := containerIdentity(pod, &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: &other}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *id.uid != 999 || *id.gid != 2000 || !slices.Equal(id.groups, []int64{5, 3000}) {
		t.Errorf("identity = uid %d gid %d groups %v", *id.uid, *id.gid, id.groups)
	}
	if !slices.Equal(id.wrap([]string{"redis-server"})[1:5], []string{"--reuid=999", "--regid=2000", "--groups=5,3000", "--pdeathsig=keep"}) {
		t.Errorf("wrap = %q", id.wrap([]string{"redis-server"}))
	}
	nonRoot := &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsNonRoot: &yes}}
	if _, err := containerIdentity(&corev1.Pod{}, nonRoot, nil); err == nil {
		t.Error("runAsNonRoot without a user was accepted")
	}
	// The image's USER is the default: the operator's image runs as 65532.
	image := int64(65532)
	if id, err := containerIdentity(&corev1.Pod{}, nonRoot, &image); err != nil || *id.uid != 65532 {
		t.Errorf("runAsNonRoot with the image's user 65532: %+v, %v", id, err)
	}
}
