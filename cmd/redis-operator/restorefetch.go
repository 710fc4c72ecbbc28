package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
)

// runRestoreFetch is `redis-operator restore-fetch`, the init container of
// a pod of a RedisCluster bootstrapped from a backup: on the shard's first
// pod (ordinal 0 of $POD_NAME) whose data directory is still empty, it
// downloads the shard's RDB named by the backup's manifest, checks its
// size and SHA-256, and leaves it where redis-server loads it (see
// backup.Fetch). Other pods, and a pod whose directory already holds a
// node, start as they are. The access keys come from $AWS_ACCESS_KEY_ID
// and $AWS_SECRET_ACCESS_KEY (unset: anonymous). It returns the exit code:
// 0 when done or nothing to do, 1 on an error (the pod's init container
// then fails and is retried by the kubelet), 2 on bad flags.
func runRestoreFetch(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("restore-fetch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var spec cachev1beta1.ObjectStoreSpec
	fs.StringVar(&spec.Endpoint, "endpoint", "", "Object store URL, http(s)://host[:port]")
	fs.StringVar(&spec.Bucket, "bucket", "", "Bucket")
	fs.StringVar(&spec.Region, "region", "us-east-1", "Region")
	fs.BoolVar(&spec.ForcePathStyle, "path-style", false, "Address the bucket in the path")
	caFile := fs.String("ca-file", "", "PEM CA bundle of the endpoint (https)")
	path := fs.String("path", "", "The backup's key prefix in the bucket (its status.path)")
	shard := fs.Int("shard", -1, "The shard's index in the manifest")
	dataDir := fs.String("data-dir", "/data", "The Redis data directory")
	pod := fs.String("pod-name", os.Getenv("POD_NAME"), "This pod's name (<statefulset>-<ordinal>); only ordinal 0 fetches")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if spec.Endpoint == "" || spec.Bucket == "" || *path == "" || *shard < 0 {
		fmt.Fprintln(stderr, "restore-fetch: --endpoint, --bucket, --path and --shard are required")
		return 2
	}
	ordinal := -1
	if i := strings.LastIndex(*pod, "-"); i >= 0 {
		if n, err := strconv.Atoi((*pod)[i+1:]); err == nil {
			ordinal = n
		}
	}
	switch {
	case ordinal < 0:
		fmt.Fprintf(stderr, "restore-fetch: cannot tell the ordinal of pod %q (--pod-name, $POD_NAME)\n", *pod)
		return 2
	case ordinal > 0:
		fmt.Fprintf(stderr, "restore-fetch: %s is not its shard's first pod; it starts empty and replicates\n", *pod)
		return 0
	}
	var ca []byte
	if *caFile != "" {
		var err error
		if ca, err = os.ReadFile(*caFile); err != nil {
			fmt.Fprintln(stderr, "restore-fetch:", err)
			return 1
		}
	}
	store, err := backup.NewStore(&spec, backup.Keys{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}, ca)
	if err != nil {
		fmt.Fprintln(stderr, "restore-fetch:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := backup.Fetch(ctx, store, *path, *shard, *dataDir)
	switch {
	case errors.Is(err, backup.ErrAlreadyStarted):
		fmt.Fprintf(stderr, "restore-fetch: %v; starting with it\n", err)
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "restore-fetch:", err)
		return 1
	}
	fmt.Fprintf(stderr, "restore-fetch: shard %d of %s/%s: %d bytes into %s\n", *shard, spec.Bucket, *path, n, *dataDir)
	return 0
}
