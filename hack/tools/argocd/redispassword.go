package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argoproj/argo-cd/v3/common"
)

// serviceAccountNamespace is where the kubelet projects the pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// newCLICommand is the part of the `argocd` CLI that Argo CD's core install
// runs: `argocd admin redis-initial-password`, the argocd-redis Deployment's
// init container. The CLI itself (github.com/argoproj/argo-cd/v3/cmd/argocd)
// is not built here: its dependencies (API server, UI assets, notifications)
// are not needed for core. This command does what the CLI's does, per its
// help ("Ensure the Redis password exists, creating a new one if
// necessary"): in the pod's namespace, it creates the Secret
// common.RedisInitialCredentials ("argocd-redis") with key
// common.RedisInitialCredentialsKey ("auth") holding a random 16-character
// password, and leaves an existing Secret alone.
func newCLICommand() *cobra.Command {
	root := &cobra.Command{Use: "argocd", SilenceUsage: true}
	admin := &cobra.Command{Use: "admin"}
	admin.AddCommand(&cobra.Command{
		Use:   "redis-initial-password",
		Short: "Ensure the Redis password exists, creating a new one if necessary.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ensureRedisPassword(cmd.Context())
		},
	})
	root.AddCommand(admin)
	return root
}

func ensureRedisPassword(ctx context.Context) error {
	ns, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return fmt.Errorf("the pod's namespace: %w", err)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	password, err := randomPassword(16)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: common.RedisInitialCredentials, Namespace: strings.TrimSpace(string(ns))},
		Data:       map[string][]byte{common.RedisInitialCredentialsKey: []byte(password)},
		Type:       corev1.SecretTypeOpaque,
	}
	fmt.Printf("Checking for initial Redis password in secret %s/%s at key %s.\n", secret.Namespace, secret.Name, common.RedisInitialCredentialsKey)
	_, err = cs.CoreV1().Secrets(secret.Namespace).Create(ctx, secret, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		fmt.Println("The Redis password secret exists already.")
	case err != nil:
		return fmt.Errorf("creating secret %s/%s: %w", secret.Namespace, secret.Name, err)
	default:
		fmt.Println("Created the Redis password secret.")
	}
	return nil
}

// randomPassword returns n characters drawn uniformly from letters and
// digits with crypto/rand.
func randomPassword(n int) (string, error) {
	const letters = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
		if err != nil {
			return "", err
		}
		b[i] = letters[k.Int64()]
	}
	return string(b), nil
}
