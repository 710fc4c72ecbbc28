package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodIPs: the certificate names the pods' IPs, sorted; a new pod
// without an IP holds reissuing back (waiting), an old, deleted or
// finished one does not, so a scale-out issues one certificate for all its
// pods while a pod that never gets an IP cannot block the others.
func TestPodIPs(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	pod := func(ip string, age time.Duration, mut ...func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		p.Status.PodIP = ip
		p.Status.Phase = corev1.PodRunning
		for _, m := range mut {
			m(&p)
		}
		return p
	}
	deleted := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }
	failed := func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }
	for _, tc := range []struct {
		name    string
		pods    []corev1.Pod
		ips     string
		waiting int
	}{
		{"all have IPs", []corev1.Pod{pod("10.244.0.9", time.Hour), pod("10.244.0.3", time.Hour)}, "10.244.0.3 10.244.0.9", 0},
		{"a new pod without IP", []corev1.Pod{pod("10.244.0.3", time.Hour), pod("", 5*time.Second)}, "10.244.0.3", 1},
		{"two new pods, one has its IP", []corev1.Pod{pod("10.244.0.4", 3*time.Second), pod("", 3*time.Second)}, "10.244.0.4", 1},
		{"a pod without IP for longer than tlsIPWait", []corev1.Pod{pod("10.244.0.3", time.Hour), pod("", 2*tlsIPWait)}, "10.244.0.3", 0},
		{"a deleted pod", []corev1.Pod{pod("", time.Second, deleted)}, "", 0},
		{"a failed pod", []corev1.Pod{pod("", time.Second, failed)}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ips, waiting := podIPs(tc.pods, now)
			got := ""
			for i, ip := range ips {
				if i > 0 {
					got += " "
				}
				got += ip.String()
			}
			if got != tc.ips || waiting != tc.waiting {
				t.Errorf("podIPs = %q, %d; want %q, %d", got, waiting, tc.ips, tc.waiting)
			}
		})
	}
}
