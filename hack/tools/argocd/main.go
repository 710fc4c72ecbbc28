// Command argocd is Argo CD v3.2.6's application controller, repo-server and
// ApplicationSet controller in one binary, built from the Go module proxy for
// the e2e suite's GitOps scenario (the local plane's node runs it for the
// quay.io/argoproj/argocd image). As in Argo CD's own image, the component is
// chosen by the name the binary is started under (argocd-application-controller,
// argocd-repo-server, argocd-applicationset-controller; symlinks), or by
// $ARGOCD_BINARY_NAME. Started as argocd, it is the one CLI command the core
// install runs (newCLICommand).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	appset "github.com/argoproj/argo-cd/v3/cmd/argocd-applicationset-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
)

func main() {
	name := filepath.Base(os.Args[0])
	if v := os.Getenv("ARGOCD_BINARY_NAME"); v != "" {
		name = v
	}
	var cmd *cobra.Command
	switch name {
	case "argocd-application-controller":
		cmd = appcontroller.NewCommand()
	case "argocd-repo-server":
		cmd = reposerver.NewCommand()
	case "argocd-applicationset-controller":
		cmd = appset.NewCommand()
	case "argocd":
		cmd = newCLICommand()
	default:
		fmt.Fprintf(os.Stderr, "argocd: unknown component %q (start it as argocd-application-controller, argocd-repo-server, argocd-applicationset-controller or argocd)\n", name)
		os.Exit(2)
	}
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
