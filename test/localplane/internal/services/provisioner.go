package services

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	// Provisioner is the provisioner name of the plane's StorageClass and
	// of the PersistentVolumes it creates.
	Provisioner = "localplane.redis-operator.io/directory"
	// StorageClass is the plane's default StorageClass.
	StorageClass = "localplane"

	provisionedBy = "pv.kubernetes.io/provisioned-by"
	defaultClass  = "storageclass.kubernetes.io/is-default-class"
)

// runProvisioner acts as the external provisioner of the plane's
// StorageClass: every pending claim of that class (or of a class that does
// not exist, or of none) gets a PersistentVolume pre-bound to it, backed by
// the directory volumes/<namespace>/<claim>-<claim uid>; the controller
// manager's persistentvolume-binder then binds the pair. When a claim is
// deleted and its volume is released under the Delete reclaim policy, the
// directory and the PersistentVolume are deleted; under Retain both stay.
// The directory outlives the pods that use the claim, so data persists as
// on a real volume.
func runProvisioner(ctx context.Context, s *Running) {
	if err := ensureStorageClass(ctx, s); err != nil {
		s.log.Error("Creating the default StorageClass failed", "err", err)
	}
	factory := informers.NewSharedInformerFactory(s.client, 10*time.Minute)
	pvcs := factory.Core().V1().PersistentVolumeClaims().Informer()
	pvs := factory.Core().V1().PersistentVolumes().Informer()
	classes := factory.Storage().V1().StorageClasses().Lister()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	handler := func(prefix string) cache.ResourceEventHandler {
		add := func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				q.Add(prefix + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	}
	_, _ = pvcs.AddEventHandler(handler("pvc:"))
	_, _ = pvs.AddEventHandler(handler("pv:"))
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer q.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), pvcs.HasSynced, pvs.HasSynced) {
		return
	}
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		var err error
		if k, ok := strings.CutPrefix(key, "pvc:"); ok {
			if obj, exists, _ := pvcs.GetIndexer().GetByKey(k); exists {
				err = s.provision(ctx, obj.(*corev1.PersistentVolumeClaim), classes.Get)
			}
		} else if k, ok := strings.CutPrefix(key, "pv:"); ok {
			if obj, exists, _ := pvs.GetIndexer().GetByKey(k); exists {
				err = s.reclaim(ctx, obj.(*corev1.PersistentVolume))
			}
		}
		if err != nil {
			s.log.Warn("Provisioning failed", "key", key, "err", err)
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

func ensureStorageClass(ctx context.Context, s *Running) error {
	bindImmediate := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	_, err := s.client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClass, Annotations: map[string]string{defaultClass: "true"}},
		Provisioner:       Provisioner,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &bindImmediate,
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (s *Running) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class func(string) (*storagev1.StorageClass, error)) error {
	if pvc.DeletionTimestamp != nil || pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending {
		return nil
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	className := ""
	if pvc.Spec.StorageClassName != nil {
		className = *pvc.Spec.StorageClassName
	}
	if className != "" {
		if sc, err := class(className); err == nil {
			if sc.Provisioner != Provisioner {
				return nil // another provisioner's class
			}
			if sc.ReclaimPolicy != nil {
				reclaim = *sc.ReclaimPolicy
			}
		}
	}
	name := "pvc-" + string(pvc.UID)
	if _, err := s.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	}
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		size = resource.MustParse("1Gi")
	}
	dir := filepath.Join(VolumesDir(s.stateDir), pvc.Namespace, pvc.Name+"-"+string(pvc.UID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Writable by any user, as local-path-provisioner makes its volumes: the
	// real kubelet applies no fsGroup to a hostPath volume, and the Redis
	// pods run as 999.
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	dirType := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    pvc.Spec.VolumeMode,
			StorageClassName:              className,
			PersistentVolumeReclaimPolicy: reclaim,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
		},
	}
	if _, err := s.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating volume for claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	s.log.Info("Provisioned volume", "claim", pvc.Namespace+"/"+pvc.Name, "volume", name, "path", dir)
	return nil
}

func (s *Running) reclaim(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Annotations[provisionedBy] != Provisioner || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.DeletionTimestamp != nil {
		return nil
	}
	if hp := pv.Spec.HostPath; hp != nil && strings.HasPrefix(hp.Path, VolumesDir(s.stateDir)+string(filepath.Separator)) {
		if err := os.RemoveAll(hp.Path); err != nil {
			return err
		}
	}
	err := s.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s.log.Info("Deleted released volume", "volume", pv.Name)
	return nil
}
