package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

func withTLS(t cachev1beta1.TLSSpec) func(*cachev1beta1.RedisCluster) {
	return func(rc *cachev1beta1.RedisCluster) { t.Enabled = true; rc.Spec.TLS = &t }
}

// TestRenderConfigTLS: with spec.tls the client port serves TLS, the plain
// port is closed unless asked for, replication and the bus use TLS and
// tls-auth-clients follows the spec; without it nothing of TLS is rendered.
func TestRenderConfigTLS(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rc        *cachev1beta1.RedisCluster
		want, not []string
	}{
		{"off", cluster(), []string{"port 6379\n"}, []string{"tls-"}},
		{"on", cluster(withTLS(cachev1beta1.TLSSpec{})), []string{"\nport 0\n", "tls-port 6379\n", "tls-replication yes\n", "tls-cluster yes\n",
			"tls-auth-clients no\n", "tls-cert-file " + TLSCertFile + "\n", "tls-key-file " + TLSKeyFile + "\n", "tls-ca-cert-file " + TLSCAFile + "\n"}, []string{"port 6379\nc"}},
		{"plain kept, client certs", cluster(withTLS(cachev1beta1.TLSSpec{PlainPort: true, AuthClients: cachev1beta1.TLSAuthClientsRequired})),
			[]string{"\nport 6380\n", "tls-port 6379\n", "tls-auth-clients yes\n"}, nil},
	} {
		conf := RenderConfig(tc.rc)
		for _, w := range tc.want {
			if !strings.Contains(conf, w) {
				t.Errorf("%s: redis.conf lacks %q:\n%s", tc.name, w, conf)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(conf, n) {
				t.Errorf("%s: redis.conf holds %q:\n%s", tc.name, n, conf)
			}
		}
	}
}

// TestStatefulSetTLS: the certificate Secret (the operator's, or
// spec.tls.secretName) is mounted in the Redis and exporter containers, the
// scripts call redis-cli with --tls, the exporter dials rediss://; a
// cluster without TLS keeps its template as before.
func TestStatefulSetTLS(t *testing.T) {
	plain := cluster(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Exporter.Enabled = true })
	if got, want := TemplateHash(plain, 0, Placement{}), TemplateHash(cluster(func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Exporter.Enabled = true
		rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: false}
	}), 0, Placement{}); got != want {
		t.Errorf("a disabled spec.tls changes the template hash")
	}
	for _, tc := range []struct {
		name, secret string
		spec         cachev1beta1.TLSSpec
	}{{"operator CA", "rc-tls", cachev1beta1.TLSSpec{}}, {"user Secret", "mine", cachev1beta1.TLSSpec{SecretName: "mine", PlainPort: true}}} {
		rc := cluster(withTLS(tc.spec), func(rc *cachev1beta1.RedisCluster) { rc.Name = "rc"; rc.Spec.Exporter.Enabled = true })
		pod := StatefulSet(rc, 0, Placement{}).Spec.Template.Spec
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == tlsVolumeName })
		if i < 0 || pod.Volumes[i].Secret == nil || pod.Volumes[i].Secret.SecretName != tc.secret {
			t.Fatalf("%s: no tls volume from Secret %s: %+v", tc.name, tc.secret, pod.Volumes)
		}
		for _, c := range pod.Containers {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == tlsVolumeName && m.MountPath == TLSDir }) {
				t.Errorf("%s: container %s does not mount %s", tc.name, c.Name, TLSDir)
			}
		}
		redis := pod.Containers[0]
		for what, script := range map[string]string{"start": redis.Command[2], "readiness": redis.ReadinessProbe.Exec.Command[2],
			"preStop": redis.Lifecycle.PreStop.Exec.Command[2]} {
			if !strings.Contains(script, "--tls --cacert "+TLSCAFile) {
				t.Errorf("%s: %s script does not call redis-cli with --tls", tc.name, what)
			}
		}
		if hasPlain := slices.ContainsFunc(redis.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == PlainPort }); hasPlain != tc.spec.PlainPort {
			t.Errorf("%s: plain port %d declared %v, want %v", tc.name, PlainPort, hasPlain, tc.spec.PlainPort)
		}
		env := map[string]string{}
		for _, e := range pod.Containers[1].Env {
			env[e.Name] = e.Value
		}
		if env["REDIS_ADDR"] != "rediss://$(POD_NAME).rc-headless.prod.svc:6379" || env["REDIS_EXPORTER_TLS_CA_CERT_FILE"] != TLSCAFile {
			t.Errorf("%s: exporter env %v does not dial TLS by the pod's name", tc.name, env)
		}
		names := []string{}
		for _, e := range pod.Containers[1].Env {
			names = append(names, e.Name)
		}
		if slices.Index(names, "POD_NAME") > slices.Index(names, "REDIS_ADDR") || slices.Index(names, "POD_NAME") < 0 {
			t.Errorf("%s: POD_NAME must come before REDIS_ADDR: %v", tc.name, names)
		}
		if !slices.Contains(TLSDNSNames(rc), "*.rc-headless.prod.svc") {
			t.Errorf("the operator's certificate does not name the exporter's host: %v", TLSDNSNames(rc))
		}
	}
}

// TestPlainPortServiceAndPolicy: with spec.tls.plainPort the client Service
// and the NetworkPolicy's client rule carry 6380 too; without it, only 6379.
func TestPlainPortServiceAndPolicy(t *testing.T) {
	for _, plain := range []bool{false, true} {
		rc := cluster(withTLS(cachev1beta1.TLSSpec{PlainPort: plain}))
		var svcPorts []int32
		for _, p := range ClientService(rc).Spec.Ports {
			svcPorts = append(svcPorts, p.Port)
		}
		var npPorts []int32
		for _, p := range NetworkPolicy(rc, "ops").Spec.Ingress[0].Ports {
			npPorts = append(npPorts, p.Port.IntVal)
		}
		want := []int32{RedisPort}
		if plain {
			want = append(want, PlainPort)
		}
		if !slices.Equal(svcPorts, want) || !slices.Equal(npPorts, want) {
			t.Errorf("plainPort %v: Service ports %v, NetworkPolicy client ports %v, want %v", plain, svcPorts, npPorts, want)
		}
	}
}
