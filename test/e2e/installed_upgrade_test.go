//go:build e2e

package e2e

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// previousRelease is the commit of the operator that users run before the
// upgrade TestInstalledUpgrade makes: the last build that landed before
// this scenario existed. Move it forward with each release.
const previousRelease = "beab2f5180cff5913dd975cf195daca7bb922f13"

// upgradeFlag is the default flag the upgraded install changes, as a
// release that changes a default would.
const upgradeFlag = "--resync-period=20s"

// TestInstalledUpgrade (label install): an operator upgrade leaves running
// clusters alone. The release users run (previousRelease, built from Git
// into bin/redis-operator-<commit> once and reused) is installed from the
// manifests it renders for the dev overlay, its image tagged with the
// commit: an image of that build pushed into the plane's registry
// (pushOperatorImage); a 3×1 cluster forms under it and gets 5000 keys.
// Then the manifests of this build are applied over it, image tag e2e-next
// (this checkout's image, pushed the same way) and one changed default flag
// (upgradeFlag), while a writer acknowledges with WAIT. Once the new
// operator pods have replaced the old and reconciled for a minute:
//   - no StatefulSet was recreated (same UIDs);
//   - a shard whose pod template did not change (same update revision)
//     has the same pods with the same restart counts; one whose template
//     changed rolled to it (the new build's builders differ), and that is
//     reported;
//   - the RedisCluster's generation did not move, and it is Ready;
//   - no operator pod logged an error about an immutable field, and the
//     new ones logged no reconciler error;
//   - every key loaded before and every acknowledged write is there.
func TestInstalledUpgrade(t *testing.T) {
	tier(t, tierCI)
	scenario(t, "install/upgrade-from-previous-release")
	previous := buildPreviousRelease(t)
	short := previousRelease[:7]
	previousImage := "ghcr.io/redis-operator/redis-operator:" + short
	const nextImage = "ghcr.io/redis-operator/redis-operator:e2e-next"
	pushOperatorImage(t, previous, previousImage)
	pushOperatorImage(t, buildStaticOperator(t, env.root, filepath.Join(env.binDir, "images", "redis-operator-e2e-next")), nextImage)
	removeOperator(t)
	t.Cleanup(func() { uninstall(t) })
	installWith(t, previous, "dev", func(d *unstructured.Unstructured) {
		setOperatorContainer(t, d, previousImage, "")
	})

	c := newCluster(t, "upgrade", nil)
	t.Cleanup(func() {
		if t.Failed() {
			printOperatorPodLogs(t, 80)
		}
	})
	rc := c.waitReady(6 * time.Minute)
	c.checkConverged(rc)
	generation := rc.Generation
	cl := c.clusterClient()
	defer cl.Close()
	keys := loadKeys(t, cl, "upgrade-loaded", 5000)

	before := c.statefulSets()
	revisions := map[string]string{}
	for name, sts := range before {
		revisions[name] = sts.Status.UpdateRevision
	}
	podsBefore := map[string]corev1.Pod{}
	for _, p := range c.pods() {
		podsBefore[p.Name] = p
	}
	oldOperatorPods := operatorPodUIDs(t)

	w := startWriter(t, cl, "upgrade", writerOptions{Wait: true})
	w.waitWrites(50, time.Minute)
	installWith(t, filepath.Join(env.binDir, "redis-operator"), "dev", func(d *unstructured.Unstructured) {
		setOperatorContainer(t, d, nextImage, upgradeFlag)
	})
	upgraded := time.Now()
	// A minute of the new operator's passes: three resyncs at 20 s, and
	// whatever rolling update a changed template asks for.
	c.poll("a minute of the upgraded operator's passes, then Ready", 8*time.Minute, func() (bool, string) {
		rc := c.get()
		return isReady(rc) && time.Since(upgraded) > time.Minute, statusSummary(rc)
	})
	w.stop()
	rc = c.waitReady(time.Minute)
	c.checkConverged(rc)
	if rc.Generation != generation {
		t.Errorf("the upgrade moved the RedisCluster's generation from %d to %d", generation, rc.Generation)
	}

	after := c.statefulSets()
	var rolled, kept []string
	for name, sts := range before {
		now, ok := after[name]
		if !ok || now.UID != sts.UID {
			t.Errorf("StatefulSet %s was recreated by the upgrade (UID %s, now %s)", name, sts.UID, now.UID)
			continue
		}
		if now.Status.UpdateRevision != revisions[name] {
			rolled = append(rolled, name)
		} else {
			kept = append(kept, name)
		}
	}
	restarted := 0
	for _, p := range c.pods() {
		old, ok := podsBefore[p.Name]
		templateChanged := len(p.OwnerReferences) == 0 || !slices.Contains(kept, p.OwnerReferences[0].Name)
		switch {
		case !ok:
			t.Errorf("pod %s did not exist before the upgrade", p.Name)
		case templateChanged:
		case p.UID != old.UID:
			t.Errorf("pod %s was recreated by the upgrade although its StatefulSet's template did not change", p.Name)
		case restartCount(&p) != restartCount(&old):
			t.Errorf("pod %s restarted %d times during the upgrade although its template did not change", p.Name, restartCount(&p)-restartCount(&old))
		}
		if ok && (p.UID != old.UID || restartCount(&p) != restartCount(&old)) {
			restarted++
		}
	}
	checkUpgradeLogs(t, oldOperatorPods)

	lost, wrong := keys.check(t, c.clusterClient(), nil)
	if len(lost)+len(wrong) > 0 {
		t.Errorf("after the upgrade %d keys are lost and %d hold another value, e.g. %v", len(lost), len(wrong), append(lost, wrong...)[:1])
	}
	res := w.verify(c.clusterClient())
	fmt.Printf("e2e: install/upgrade-from-previous-release from %s: %d StatefulSets kept, %d rolled to a changed template (%s), %d pods restarted; of 5000 keys %d lost; writer: %s, none lost\n",
		short, len(kept), len(rolled), strings.Join(rolled, " "), restarted, len(lost)+len(wrong), res)
}

// buildPreviousRelease returns bin/redis-operator-<commit>, building
// previousRelease from the repository's Git history (git archive, then a
// static go build, as its image needs) when it is missing or not static. A
// clone without that commit (a shallow one) fails the scenario with what to
// do.
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(env.binDir, "redis-operator-"+previousRelease[:7])
	if isStatic(dst) {
		return dst
	}
	start := time.Now()
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive --format=tar %s | tar -x -C %q", env.root, previousRelease, src))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extracting the previous release %s from Git (a shallow clone lacks it: git fetch --unshallow): %v\n%s", previousRelease, err, out)
	}
	buildStaticOperator(t, src, dst)
	t.Logf("built the previous release %s in %.0fs", previousRelease[:7], time.Since(start).Seconds())
	return dst
}

// buildStaticOperator builds cmd/redis-operator of the module in dir into
// dst as hack/images.sh builds the operator's image's binary (CGO_ENABLED=0:
// the image has no C library) and returns dst.
func buildStaticOperator(t *testing.T, dir, dst string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".tmp"
	cmd := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-ldflags=-s -w", "-o", tmp, "./cmd/redis-operator")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s from %s: %v\n%s", dst, dir, err, out)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// isStatic reports whether path is an ELF executable with no program
// interpreter (statically linked).
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// pushOperatorImage pushes binary, a static operator build, as the
// operator image ref into the registry storage of `make images`, which the
// plane's registry serves (it serves what is pushed while it runs): bin/
// localplane-images --extra-operator, which stamps it under its own name
// (redis-operator-<tag>), so the suite's operator image is left alone and
// an unchanged binary is not pushed again.
func pushOperatorImage(t *testing.T, binary, ref string) {
	t.Helper()
	tool := filepath.Join(env.binDir, "localplane-images")
	if err := build(env.root, "-C", filepath.Join(env.root, "test", "localplane"), "build", "-o", tool, "./cmd/localplane-images"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "--bin-dir", env.binDir, "--extra-operator", ref+"="+binary).CombinedOutput()
	if err != nil {
		t.Fatalf("pushing %s (%s): %v\n%s", ref, binary, err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// setOperatorContainer sets the image of the Deployment's manager
// container and, when arg is not empty, appends arg to its args.
func setOperatorContainer(t *testing.T, d *unstructured.Unstructured, image, arg string) {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i, raw := range containers {
		ctr := raw.(map[string]any)
		if ctr["name"] != "manager" {
			continue
		}
		found = true
		ctr["image"] = image
		if arg != "" {
			args, _, _ := unstructured.NestedStringSlice(ctr, "args")
			ctr["args"] = toAny(append(args, arg))
		}
		containers[i] = ctr
	}
	if !found {
		t.Fatal("the operator's Deployment has no container named manager")
	}
	if err := unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// operatorPodUIDs returns the UIDs of the installed operator's pods.
func operatorPodUIDs(t *testing.T) map[types.UID]bool {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.k8s.List(context.Background(), pods, client.InNamespace(installNS)); err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]bool{}
	for _, p := range pods.Items {
		out[p.UID] = true
	}
	return out
}

// checkUpgradeLogs reads every log file of the installed operator's pods
// (podLogDirs: <ns>_<name>_<uid>/<container>/<restart>.log): no
// line may speak of an immutable field, and the pods that are not in old
// (the upgraded ones) may log no reconciler error.
func checkUpgradeLogs(t *testing.T, old map[types.UID]bool) {
	t.Helper()
	dirs := podLogDirs(installNS)
	newPods := 0
	for _, dir := range dirs {
		uid := types.UID(dir[strings.LastIndexByte(dir, '_')+1:])
		files, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
		upgraded := !old[uid]
		if upgraded {
			newPods++
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Errorf("reading %s: %v", f, err)
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(strings.ToLower(line), "immutable") {
					t.Errorf("%s: %s", filepath.Base(dir), line)
				}
				if upgraded && strings.Contains(line, "Reconciler error") {
					t.Errorf("upgraded operator %s: %s", filepath.Base(dir), line)
				}
			}
		}
	}
	if newPods == 0 {
		t.Error("no log of an upgraded operator pod found")
	}
}
