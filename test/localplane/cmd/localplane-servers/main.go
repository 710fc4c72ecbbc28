// Command localplane-servers puts the server images that `make images`
// built from Debian trixie (redis-8.0, valkey-8.1; package images) on this
// host as runnable trees with wrapper scripts, for the benchmarks that run
// real servers outside the plane (`make bench-servers` runs it through
// hack/bench-servers.sh):
//
//	localplane-servers --bin-dir DIR [NAME...]
//
// Each tree lands in ${REDIS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/redis-operator}/servers/NAME
// with the wrappers redis-server and redis-cli (for Valkey also
// valkey-server and valkey-cli) beside its rootfs, and is made again only
// when its image's stamp changes. --bin-dir holds bin/registry; without
// NAMEs, every server image is installed. Root is not needed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/redis-operator/redis-operator/test/localplane/internal/images"
)

func main() {
	binDir := flag.String("bin-dir", "bin", "directory holding the registry binary")
	flag.Parse()
	if err := run(*binDir, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "localplane-servers:", err)
		os.Exit(1)
	}
}

func run(binDir string, names []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	imagesDir, err := images.Dir()
	if err != nil {
		return err
	}
	serversDir, err := images.ServersDir()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		for n := range images.ServerImages {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	return images.InstallServers(ctx, images.ServersOptions{
		BinDir:     binDir,
		ImagesDir:  imagesDir,
		ServersDir: serversDir,
		Names:      names,
		Logf:       func(format string, args ...any) { fmt.Printf(format+"\n", args...) },
	})
}
