package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redis-operator/redis-operator/test/localplane/internal/expand"
)

// volume is a pod volume materialised as a local directory.
type volume struct {
	path string
	// readOnly is forced for ConfigMap, Secret, downwardAPI and projected
	// volumes, which the kubelet always mounts read-only.
	readOnly bool
}

// file is one file of a ConfigMap, Secret, downwardAPI or projected volume.
type file struct {
	data []byte
	mode fs.FileMode
}

// token is a cached service-account token of a projected volume.
type token struct {
	value   string
	refresh time.Time
}

// volumeSet materialises the volumes of one pod under its directory.
type volumeSet struct {
	n      *Node
	podDir string
	tokens map[string]token
	// setUp holds the emptyDir, hostPath and claim volumes already set up;
	// like the kubelet, ownership is applied once, when the pod starts.
	setUp map[string]*volume
}

// sync creates or refreshes every volume of pod and returns them by name.
// It is called when the pod starts and then periodically, so ConfigMap,
// Secret, downward API and token contents follow their sources as with the
// kubelet (files mounted through subPath keep their first content, also as
// with the kubelet).
func (vs *volumeSet) sync(ctx context.Context, pod *corev1.Pod, podIP string) (map[string]*volume, error) {
	out := map[string]*volume{}
	var fsGroup *int64
	var fsGroupPolicy *corev1.PodFSGroupChangePolicy
	if sc := pod.Spec.SecurityContext; sc != nil {
		fsGroup, fsGroupPolicy = sc.FSGroup, sc.FSGroupChangePolicy
	}
	for _, v := range pod.Spec.Volumes {
		if vol, ok := vs.setUp[v.Name]; ok {
			out[v.Name] = vol
			continue
		}
		dir := filepath.Join(vs.podDir, "volumes", v.Name)
		vol := &volume{path: dir}
		var files map[string]file
		var err error
		switch {
		case v.EmptyDir != nil:
			err = ensureDir(dir, 0o777)
			if err == nil {
				err = setOwnership(dir, fsGroup, nil)
			}
		case v.HostPath != nil:
			vol.path = v.HostPath.Path
			if t := v.HostPath.Type; t != nil && *t == corev1.HostPathDirectoryOrCreate {
				err = ensureDir(vol.path, 0o755)
			} else if _, serr := os.Stat(vol.path); serr != nil {
				err = fmt.Errorf("hostPath %s: %w", vol.path, serr)
			}
		case v.PersistentVolumeClaim != nil:
			vol.path, err = vs.claimPath(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			vol.readOnly = v.PersistentVolumeClaim.ReadOnly
			if err == nil {
				err = setOwnership(vol.path, fsGroup, fsGroupPolicy)
			}
		case v.ConfigMap != nil:
			vol.readOnly = true
			files, err = vs.configMapFiles(pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
		case v.Secret != nil:
			vol.readOnly = true
			files, err = vs.secretFiles(pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
		case v.DownwardAPI != nil:
			vol.readOnly = true
			files, err = vs.downwardFiles(pod, podIP, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		case v.Projected != nil:
			vol.readOnly = true
			files, err = vs.projectedFiles(ctx, pod, podIP, v.Projected)
		default:
			err = fmt.Errorf("volume type is not supported on the local plane (supported: emptyDir, hostPath, persistentVolumeClaim, configMap, secret, downwardAPI, projected)")
		}
		if err == nil && files != nil {
			err = writeVolume(dir, files, fsGroup)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		if files == nil {
			vs.setUp[v.Name] = vol
		}
		out[v.Name] = vol
	}
	return out, nil
}

// claimPath returns the directory of a bound claim's volume.
func (vs *volumeSet) claimPath(ctx context.Context, namespace, claim string) (string, error) {
	pvc, err := vs.n.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("claim %s: %w", claim, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("claim %s is not bound yet", claim)
	}
	pv, err := vs.n.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("volume %s of claim %s: %w", pvc.Spec.VolumeName, claim, err)
	}
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, ensureDir(pv.Spec.HostPath.Path, 0o755)
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, nil
	}
	return "", fmt.Errorf("volume %s of claim %s is neither hostPath nor local", pv.Name, claim)
}

func modeOr(m *int32, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m) & fs.ModePerm
}

// project selects keys from data as a ConfigMap or Secret volume does:
// every key, or only items (each to its path, with its mode).
func project(data map[string][]byte, items []corev1.KeyToPath, optional bool, mode fs.FileMode, what string) (map[string]file, error) {
	out := map[string]file{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = file{data: v, mode: mode}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		out[it.Path] = file{data: v, mode: modeOr(it.Mode, mode)}
	}
	return out, nil
}

func (vs *volumeSet) configMapFiles(ns, name string, items []corev1.KeyToPath, optional *bool, defaultMode *int32) (map[string]file, error) {
	cm, err := vs.n.configMaps.ConfigMaps(ns).Get(name)
	if err != nil {
		if isOptional(optional) {
			return map[string]file{}, nil
		}
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return project(data, items, isOptional(optional), modeOr(defaultMode, 0o644), "configmap "+name)
}

func (vs *volumeSet) secretFiles(ns, name string, items []corev1.KeyToPath, optional *bool, defaultMode *int32) (map[string]file, error) {
	s, err := vs.n.secrets.Secrets(ns).Get(name)
	if err != nil {
		if isOptional(optional) {
			return map[string]file{}, nil
		}
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return project(s.Data, items, isOptional(optional), modeOr(defaultMode, 0o644), "secret "+name)
}

func (vs *volumeSet) downwardFiles(pod *corev1.Pod, podIP string, items []corev1.DownwardAPIVolumeFile, defaultMode *int32) (map[string]file, error) {
	out := map[string]file{}
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = vs.n.env.fieldValue(pod, it.FieldRef.FieldPath, podIP)
		case it.ResourceFieldRef != nil:
			c := findContainer(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return nil, fmt.Errorf("downwardAPI %s: no container %q", it.Path, it.ResourceFieldRef.ContainerName)
			}
			val, err = resourceValue(c, it.ResourceFieldRef)
		}
		if err != nil {
			return nil, fmt.Errorf("downwardAPI %s: %w", it.Path, err)
		}
		out[it.Path] = file{data: []byte(val), mode: modeOr(it.Mode, modeOr(defaultMode, 0o644))}
	}
	return out, nil
}

func (vs *volumeSet) projectedFiles(ctx context.Context, pod *corev1.Pod, podIP string, p *corev1.ProjectedVolumeSource) (map[string]file, error) {
	out := map[string]file{}
	add := func(files map[string]file, err error) error {
		if err != nil {
			return err
		}
		for k, v := range files {
			out[k] = v
		}
		return nil
	}
	for _, src := range p.Sources {
		var err error
		switch {
		case src.ConfigMap != nil:
			err = add(vs.configMapFiles(pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, p.DefaultMode))
		case src.Secret != nil:
			err = add(vs.secretFiles(pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional, p.DefaultMode))
		case src.DownwardAPI != nil:
			err = add(vs.downwardFiles(pod, podIP, src.DownwardAPI.Items, p.DefaultMode))
		case src.ServiceAccountToken != nil:
			var tok string
			tok, err = vs.serviceAccountToken(ctx, pod, src.ServiceAccountToken)
			out[src.ServiceAccountToken.Path] = file{data: []byte(tok), mode: modeOr(p.DefaultMode, 0o644)}
		default:
			err = errors.New("projected source type is not supported on the local plane")
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// serviceAccountToken requests a token bound to the pod through the
// TokenRequest API, and renews it after 80% of its lifetime as the kubelet
// does.
func (vs *volumeSet) serviceAccountToken(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	key := src.Audience + "/" + src.Path
	if t, ok := vs.tokens[key]; ok && time.Now().Before(t.refresh) {
		return t.value, nil
	}
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	resp, err := vs.n.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s: %w", sa, err)
	}
	life := time.Until(resp.Status.ExpirationTimestamp.Time)
	vs.tokens[key] = token{value: resp.Status.Token, refresh: time.Now().Add(life * 8 / 10)}
	return resp.Status.Token, nil
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name || (name == "" && i == 0) {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func ensureDir(dir string, mode fs.FileMode) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// writeVolume makes dir hold exactly files: changed files are replaced
// atomically (write and rename), files no longer wanted are removed.
func writeVolume(dir string, files map[string]file, fsGroup *int64) error {
	if err := ensureDir(dir, 0o755); err != nil {
		return err
	}
	for rel, f := range files {
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("path %q is not a relative path inside the volume", rel)
		}
		p := filepath.Join(dir, rel)
		mode := f.mode
		gid := -1
		if fsGroup != nil {
			gid = int(*fsGroup)
			mode |= 0o040
		}
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.data) {
			if st, err := os.Stat(p); err == nil && st.Mode().Perm() == mode {
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := filepath.Join(filepath.Dir(p), ".."+filepath.Base(p)+".tmp")
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return err
		}
		if err := os.Chown(tmp, -1, gid); err != nil {
			return err
		}
		if err := os.Chmod(tmp, mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	var stale []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			for k := range files {
				if strings.HasPrefix(k, rel+string(filepath.Separator)) {
					return nil
				}
			}
			stale = append(stale, p)
			return filepath.SkipDir
		}
		if _, ok := files[rel]; !ok {
			stale = append(stale, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// setOwnership gives a writable volume to fsGroup as the kubelet does
// (pkg/volume/volume_linux.go SetVolumeOwnership): group fsGroup on every
// entry, group read-write on files, and group rwx plus setgid on
// directories. With the OnRootMismatch policy it does nothing when the root
// already has that group and mode.
func setOwnership(root string, fsGroup *int64, policy *corev1.PodFSGroupChangePolicy) error {
	if fsGroup == nil {
		return nil
	}
	gid := int(*fsGroup)
	fileMask, dirMask := fs.FileMode(0o660), fs.FileMode(0o770)|fs.ModeSetgid
	if policy != nil && *policy == corev1.FSGroupChangeOnRootMismatch {
		if st, err := os.Stat(root); err == nil {
			if statGid(st) == gid && st.Mode()&dirMask == dirMask {
				return nil
			}
		}
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mask := fileMask
		if d.IsDir() {
			mask = dirMask
		}
		return os.Chmod(p, info.Mode()|mask)
	})
}

func statGid(st fs.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Gid)
	}
	return -1
}

// mountSpec is one bind mount into a container's mount namespace.
type mountSpec struct {
	src, dst string
	dir      bool
	readOnly bool
}

// containerMounts resolves c's volumeMounts against the pod's volumes,
// subPath and subPathExpr included, in mount order (shallow targets first,
// so nested mounts land inside their parents).
func containerMounts(c *corev1.Container, vols map[string]*volume, e *env) ([]mountSpec, error) {
	var out []mountSpec
	for _, m := range c.VolumeMounts {
		vol, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no such volume", m.Name)
		}
		if !filepath.IsAbs(m.MountPath) || filepath.Clean(m.MountPath) == "/" {
			return nil, fmt.Errorf("volumeMount %q: mountPath %q must be an absolute path other than /", m.Name, m.MountPath)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			missing := false
			sub = expand.String(m.SubPathExpr, func(name string) (string, bool) {
				v, ok := e.values[name]
				if !ok || v == "" {
					missing = true
				}
				return v, ok
			})
			if missing {
				return nil, fmt.Errorf("volumeMount %q: subPathExpr %q refers to an unset variable", m.Name, m.SubPathExpr)
			}
		}
		src := vol.path
		if sub != "" {
			if !filepath.IsLocal(sub) {
				return nil, fmt.Errorf("volumeMount %q: subPath %q must be a relative path inside the volume", m.Name, sub)
			}
			src = filepath.Join(vol.path, sub)
			if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			}
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("volumeMount %q: %w", m.Name, err)
		}
		out = append(out, mountSpec{src: src, dst: filepath.Clean(m.MountPath), dir: st.IsDir(), readOnly: m.ReadOnly || vol.readOnly})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i].dst, "/") < strings.Count(out[j].dst, "/")
	})
	return out, nil
}
