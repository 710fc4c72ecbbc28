package node

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/redis-operator/redis-operator/test/localplane/internal/expand"
)

// defaultPath is the PATH of a container that sets none (the Debian-based
// images in question use this one).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// envResolver computes a container's environment as the kubelet does
// (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables): the
// KUBERNETES_SERVICE_* variables, then envFrom, then env in order, each
// value with $(VAR) references to earlier variables expanded; valueFrom
// reads ConfigMaps, Secrets, the downward API and container resources.
//
// Service links for Services other than "kubernetes" are not set: nothing
// here routes ClusterIPs. KUBERNETES_SERVICE_HOST/PORT point at the real API
// server, so in-cluster clients work.
type envResolver struct {
	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister
	apiHost    string
	apiPort    int
	nodeName   string
	hostIP     string
}

// env is an ordered environment.
type env struct {
	names  []string
	values map[string]string
}

func (e *env) set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// list renders the environment as NAME=value strings for exec.
func (e *env) list() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.values[n])
	}
	return out
}

func (e *env) mapping() expand.Mapping { return expand.MapOf(e.values) }

// containerEnv resolves c's environment in pod, whose IP is podIP.
func (r *envResolver) containerEnv(pod *corev1.Pod, c *corev1.Container, podIP string) (*env, error) {
	e := &env{}
	e.set("PATH", defaultPath)
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	e.set("HOSTNAME", hostname)
	e.set("HOME", "/root")
	port := strconv.Itoa(r.apiPort)
	tcp := "tcp://" + r.apiHost + ":" + port
	for _, kv := range [][2]string{
		{"KUBERNETES_SERVICE_HOST", r.apiHost}, {"KUBERNETES_SERVICE_PORT", port},
		{"KUBERNETES_SERVICE_PORT_HTTPS", port}, {"KUBERNETES_PORT", tcp},
		{"KUBERNETES_PORT_443_TCP", tcp}, {"KUBERNETES_PORT_443_TCP_PROTO", "tcp"},
		{"KUBERNETES_PORT_443_TCP_PORT", port}, {"KUBERNETES_PORT_443_TCP_ADDR", r.apiHost},
	} {
		e.set(kv[0], kv[1])
	}

	for _, from := range c.EnvFrom {
		data := map[string]string{}
		switch {
		case from.ConfigMapRef != nil:
			cm, err := r.configMaps.ConfigMaps(pod.Namespace).Get(from.ConfigMapRef.Name)
			if err != nil {
				if isOptional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := r.secrets.Secrets(pod.Namespace).Get(from.SecretRef.Name)
			if err != nil {
				if isOptional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, err)
			}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := from.Prefix + k
			// The kubelet skips keys that are not valid variable names.
			if len(validation.IsEnvVarName(name)) == 0 {
				e.set(name, data[k])
			}
		}
	}

	for _, v := range c.Env {
		if v.ValueFrom == nil {
			e.set(v.Name, expand.String(v.Value, e.mapping()))
			continue
		}
		val, ok, err := r.valueFrom(pod, c, v.ValueFrom, podIP)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", v.Name, err)
		}
		if ok {
			e.set(v.Name, val)
		}
	}
	return e, nil
}

func isOptional(b *bool) bool { return b != nil && *b }

func (r *envResolver) valueFrom(pod *corev1.Pod, c *corev1.Container, src *corev1.EnvVarSource, podIP string) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := r.fieldValue(pod, src.FieldRef.FieldPath, podIP)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := resourceValue(c, src.ResourceFieldRef)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := r.configMaps.ConfigMaps(pod.Namespace).Get(ref.Name)
		if err != nil {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !isOptional(ref.Optional) {
			return "", false, fmt.Errorf("configmap %q has no key %q", ref.Name, ref.Key)
		}
		return v, ok, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := r.secrets.Secrets(pod.Namespace).Get(ref.Name)
		if err != nil {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !isOptional(ref.Optional) {
			return "", false, fmt.Errorf("secret %q has no key %q", ref.Name, ref.Key)
		}
		return string(v), ok, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom source")
}

// fieldValue reads a downward API field path (the fields listed under
// "Information available via fieldRef" in the Kubernetes docs).
func (r *envResolver) fieldValue(pod *corev1.Pod, fieldPath, podIP string) (string, error) {
	if key, ok := subscript(fieldPath, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(fieldPath, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return r.nodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return r.hostIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", fieldPath)
}

// subscript parses `prefix['key']`.
func subscript(fieldPath, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(fieldPath, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// formatMap renders labels or annotations as the downward API does: one
// key="value" line per entry, sorted by key, values quoted as Go strings.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%s", k, strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceValue computes a resourceFieldRef value: the container's limit
// (or request) divided by the divisor and rounded up; a missing limit is
// the node's allocatable amount (the machine's cores and memory).
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		switch name {
		case "cpu":
			q = *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
		case "memory":
			q = *resource.NewQuantity(int64(totalMemory()), resource.BinarySI)
		default:
			q = resource.Quantity{}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}
