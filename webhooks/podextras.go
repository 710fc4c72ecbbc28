package webhooks

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// restrictedEvaluator checks a built pod template against Pod Security
// "restricted" (k8s.io/pod-security-admission, the checks the API
// server's PodSecurity admission runs), after the field rules below.
var restrictedEvaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		panic(fmt.Sprintf("pod security evaluator: %v", err))
	}
	return e
}()

// validatePodExtras checks spec.pod's sidecars, init containers, volumes,
// mounts and security context overrides: no name or mount path the
// operator uses itself, mounts of volumes that exist, and security
// contexts within Pod Security "restricted", each error naming its field.
// Last, the pod the operator would build is evaluated against
// "restricted" as the API server would, for what the field rules do not
// cover (host namespaces or ports in a sidecar, unsafe sysctls, ...).
func validatePodExtras(spec *cachev1beta1.RedisClusterSpec, p *field.Path, r *result) {
	pod := &spec.Pod
	names := map[string]bool{}
	for _, n := range resources.ReservedContainerNames {
		names[n] = true
	}
	for _, list := range []struct {
		field string
		cs    []corev1.Container
	}{{"sidecars", pod.Sidecars}, {"initContainers", pod.InitContainers}} {
		for i := range list.cs {
			c := &list.cs[i]
			cp := p.Child(list.field).Index(i)
			switch {
			case slices.Contains(resources.ReservedContainerNames, c.Name):
				r.add(field.Invalid(cp.Child("name"), c.Name, fmt.Sprintf("is a container the operator runs (%s)", strings.Join(resources.ReservedContainerNames, ", "))))
			case names[c.Name]:
				r.add(field.Duplicate(cp.Child("name"), c.Name))
			default:
				for _, msg := range validation.IsDNS1123Label(c.Name) {
					r.add(field.Invalid(cp.Child("name"), c.Name, msg))
				}
			}
			names[c.Name] = true
			if c.Image == "" {
				r.add(field.Required(cp.Child("image"), "a container image"))
			}
			if c.SecurityContext != nil {
				validateContainerSecurity(c.SecurityContext, cp.Child("securityContext"), r)
			}
		}
	}

	volumes := map[string]bool{}
	for i, v := range pod.Volumes {
		vp := p.Child("volumes").Index(i).Child("name")
		switch {
		case slices.Contains(resources.ReservedVolumeNames, v.Name):
			r.add(field.Invalid(vp, v.Name, fmt.Sprintf("is a volume the operator defines (%s)", strings.Join(resources.ReservedVolumeNames, ", "))))
		case volumes[v.Name]:
			r.add(field.Duplicate(vp, v.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(v.Name) {
				r.add(field.Invalid(vp, v.Name, msg))
			}
		}
		volumes[v.Name] = true
	}
	for i, m := range pod.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !volumes[m.Name] {
			r.add(field.NotFound(mp.Child("name"), m.Name))
		}
		clean := path.Clean(m.MountPath)
		if !path.IsAbs(m.MountPath) {
			r.add(field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
			continue
		}
		for _, own := range resources.ReservedMountPaths {
			if clean == own || strings.HasPrefix(clean, own+"/") || strings.HasPrefix(own, clean+"/") || clean == "/" {
				r.add(field.Invalid(mp.Child("mountPath"), m.MountPath, fmt.Sprintf("overlaps %s, which the redis container mounts itself", own)))
				break
			}
		}
	}

	if sc := pod.SecurityContext; sc != nil {
		validatePodSecurity(sc, p.Child("securityContext"), r)
	}
	if sc := pod.ContainerSecurityContext; sc != nil {
		validateContainerSecurity(sc, p.Child("containerSecurityContext"), r)
	}
	if len(r.errs) > 0 {
		return
	}
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "validate"}, Spec: *spec.DeepCopy()}
	tpl := resources.StatefulSet(rc, 0, resources.Placement{}).Spec.Template
	lv := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	if res := policy.AggregateCheckResults(restrictedEvaluator.EvaluatePod(lv, &tpl.ObjectMeta, &tpl.Spec)); !res.Allowed {
		r.add(field.Forbidden(p, fmt.Sprintf("the Redis pod would not meet Pod Security \"restricted\": %s", res.ForbiddenDetail())))
	}
}

// validatePodSecurity rejects pod security context fields that leave Pod
// Security "restricted"
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
func validatePodSecurity(sc *corev1.PodSecurityContext, p *field.Path, r *result) {
	if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		r.add(field.Forbidden(p.Child("runAsNonRoot"), "may not be false: Pod Security restricted requires non-root containers"))
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		r.add(field.Forbidden(p.Child("runAsUser"), "may not be 0 (root): Pod Security restricted"))
	}
	validateSeccomp(sc.SeccompProfile, p.Child("seccompProfile"), r)
	if w := sc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
		r.add(field.Forbidden(p.Child("windowsOptions", "hostProcess"), "may not be true: Pod Security baseline forbids host processes"))
	}
}

// validateContainerSecurity rejects container security context fields that
// leave Pod Security "restricted".
func validateContainerSecurity(sc *corev1.SecurityContext, p *field.Path, r *result) {
	if sc.Privileged != nil && *sc.Privileged {
		r.add(field.Forbidden(p.Child("privileged"), "may not be true: Pod Security baseline forbids privileged containers"))
	}
	if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
		r.add(field.Forbidden(p.Child("allowPrivilegeEscalation"), "may not be true: Pod Security restricted"))
	}
	if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		r.add(field.Forbidden(p.Child("runAsNonRoot"), "may not be false: Pod Security restricted requires non-root containers"))
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		r.add(field.Forbidden(p.Child("runAsUser"), "may not be 0 (root): Pod Security restricted"))
	}
	if c := sc.Capabilities; c != nil {
		for i, add := range c.Add {
			if add != "NET_BIND_SERVICE" {
				r.add(field.Forbidden(p.Child("capabilities", "add").Index(i), fmt.Sprintf("%s: Pod Security restricted allows adding only NET_BIND_SERVICE", add)))
			}
		}
		if !slices.Contains(c.Drop, "ALL") {
			r.add(field.Required(p.Child("capabilities", "drop"), "must contain ALL: Pod Security restricted"))
		}
	}
	if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		r.add(field.Forbidden(p.Child("procMount"), "must be Default: Pod Security baseline"))
	}
	validateSeccomp(sc.SeccompProfile, p.Child("seccompProfile"), r)
	if w := sc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
		r.add(field.Forbidden(p.Child("windowsOptions", "hostProcess"), "may not be true: Pod Security baseline forbids host processes"))
	}
}

func validateSeccomp(sp *corev1.SeccompProfile, p *field.Path, r *result) {
	if sp != nil && sp.Type != corev1.SeccompProfileTypeRuntimeDefault && sp.Type != corev1.SeccompProfileTypeLocalhost {
		r.add(field.Forbidden(p.Child("type"), fmt.Sprintf("%s: Pod Security restricted allows only RuntimeDefault or Localhost", sp.Type)))
	}
}

// validateServices checks spec.service and spec.externalAccess: types the
// operator supports (the CRD's enums, again for objects written through
// v1alpha1) and valid annotations.
func validateServices(spec *cachev1beta1.RedisClusterSpec, p *field.Path, r *result) {
	if s := spec.Service; s != nil {
		switch s.Type {
		case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		default:
			r.add(field.NotSupported(p.Child("service", "type"), s.Type, []string{"ClusterIP", "NodePort", "LoadBalancer"}))
		}
		r.add(apivalidation.ValidateAnnotations(s.Annotations, p.Child("service", "annotations"))...)
	}
	if ea := spec.ExternalAccess; ea != nil {
		switch ea.Type {
		case "", corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP:
		case corev1.ServiceTypeNodePort:
			r.add(field.Invalid(p.Child("externalAccess", "type"), ea.Type,
				"NodePort is not supported: a node port differs from 6379, and Redis 7.0 announces one port for clients, replicas and the cluster bus alike; use LoadBalancer or ClusterIP"))
		default:
			r.add(field.NotSupported(p.Child("externalAccess", "type"), ea.Type, []string{"LoadBalancer", "ClusterIP"}))
		}
		r.add(apivalidation.ValidateAnnotations(ea.Annotations, p.Child("externalAccess", "annotations"))...)
	}
}
