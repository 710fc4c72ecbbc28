package node

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// schedulerName is the scheduler this node stands in for; pods asking for
// another scheduler are left alone.
const schedulerName = corev1.DefaultSchedulerName

// runScheduler binds every unscheduled pod to this node once its
// nodeSelector matches the node and its claims are bound (a real
// scheduler's VolumeBinding step). Until then the pod's PodScheduled
// condition says why, as the real scheduler reports it. Affinity, topology
// spread and taints are not evaluated: there is one node.
func runScheduler(ctx context.Context, n *Node) {
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
	inf := factory.Core().V1().Pods().Informer()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer q.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	recorder := n.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: schedulerName})
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		obj, exists, err := inf.GetIndexer().GetByKey(key)
		pod, _ := obj.(*corev1.Pod)
		switch {
		case err != nil || !exists || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil:
			q.Forget(key)
		case pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != schedulerName:
			q.Forget(key)
		default:
			if reason := n.unschedulable(ctx, pod); reason != "" {
				n.markUnschedulable(ctx, pod, reason)
				q.AddAfter(key, time.Second)
			} else if err := n.bind(ctx, pod); err != nil {
				n.log.Warn("Binding pod failed", "pod", key, "err", err)
				q.AddRateLimited(key)
			} else {
				recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", key, n.name)
				q.Forget(key)
			}
		}
		q.Done(key)
	}
}

// unschedulable says why pod cannot go to this node yet, or "".
func (n *Node) unschedulable(ctx context.Context, pod *corev1.Pod) string {
	labels := map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": n.name}
	if node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err == nil {
		labels = node.Labels
	}
	for k, v := range pod.Spec.NodeSelector {
		if labels[k] != v {
			return fmt.Sprintf("0/1 nodes are available: 1 node(s) didn't match Pod's node selector (%s=%s).", k, v)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		name := v.PersistentVolumeClaim.ClaimName
		pvc, err := n.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("persistentvolumeclaim %q not found", name)
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
		}
	}
	return ""
}

func (n *Node) markUnschedulable(ctx context.Context, pod *corev1.Pod, reason string) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == reason {
			return
		}
	}
	pod = pod.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: reason, LastTransitionTime: metav1.Now()}
	replaced := false
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			pod.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		pod.Status.Conditions = append(pod.Status.Conditions, cond)
	}
	if _, err := n.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		n.log.Warn("Reporting unschedulable pod failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

func (n *Node) bind(ctx context.Context, pod *corev1.Pod) error {
	return n.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.name},
	}, metav1.CreateOptions{})
}
