package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis-operator/redis-operator/test/localplane"
)

// controlSocket is where `up` takes node commands: POST
// /nodes/<name>/lose and /nodes/<name>/restore (Plane.LoseNode,
// Plane.RestoreNode), answered 204, or 4xx/5xx with the error as text.
func controlSocket(stateDir string) string { return filepath.Join(stateDir, "control.sock") }

// serveControl serves the control socket until ctx ends.
func serveControl(ctx context.Context, p *localplane.Plane) error {
	path := controlSocket(p.StateDir)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /nodes/{name}/{action}", func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch name := r.PathValue("name"); r.PathValue("action") {
		case "lose":
			err = p.LoseNode(name)
		case "restore":
			err = p.RestoreNode(name)
		default:
			http.Error(w, "unknown action "+r.PathValue("action"), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
		_ = os.Remove(path)
	}()
	go func() { _ = srv.Serve(l) }()
	return nil
}

// nodeCommand is `localplane node lose|restore --state-dir DIR NAME`: it
// asks the plane running `up` in DIR to lose or restore a node.
func nodeCommand(args []string) error {
	if len(args) < 1 || (args[0] != "lose" && args[0] != "restore") {
		return errors.New("usage: localplane node lose|restore --state-dir DIR NODE")
	}
	action := args[0]
	fs := flag.NewFlagSet("node "+action, flag.ExitOnError)
	stateDir := fs.String("state-dir", "", "state directory of the plane (required)")
	_ = fs.Parse(args[1:])
	if *stateDir == "" || fs.NArg() != 1 {
		return errors.New("usage: localplane node lose|restore --state-dir DIR NODE")
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", controlSocket(*stateDir))
		},
	}}
	resp, err := client.Post("http://localplane/nodes/"+fs.Arg(0)+"/"+action, "text/plain", nil)
	if err != nil {
		return fmt.Errorf("is a plane up in %s? %w", *stateDir, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("node %s %s: %s", action, fs.Arg(0), strings.TrimSpace(string(body)))
	}
	return nil
}
