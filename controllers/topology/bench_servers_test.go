package topology

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// benchServer is a server build the reshard benchmarks run on, with the CLI whose
// rebalance they compare the engine with on it: its own.
type benchServer struct {
	name   string // product and major.minor: "redis-7.0", "redis-8.0", "valkey-8.1"
	server string // the server binary, REDIS_SERVER
	cli    string // its CLI, REDIS_CLI
}

// hostServer names the host's redis-server (Debian bookworm's 7.0, /usr/bin).
const hostServer = "redis-7.0"

// envBenchServers names the environment variable that lists the servers, comma-separated.
const envBenchServers = "BENCH_SERVERS"

// serverLabel is the table's wording of a server's name: "redis-8.0" is "redis 8.0".
func serverLabel(name string) string { return strings.Replace(name, "-", " ", 1) }

// serversDir is where `make bench-servers` (hack/bench-servers.sh) puts the other servers'
// trees and wrappers: ${REDIS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/redis-operator}/servers.
func serversDir() (string, error) {
	if d := os.Getenv("REDIS_OPERATOR_CACHE"); d != "" {
		return filepath.Join(d, "servers"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "redis-operator", "servers"), nil
}

// cachedServer is the server NAME of the servers cache: its redis-server and redis-cli
// wrappers, or for Valkey valkey-server and valkey-cli. ok is false when it is not there.
func cachedServer(dir, name string) (benchServer, bool) {
	product := "redis"
	if strings.HasPrefix(name, "valkey-") {
		product = "valkey"
	}
	s := benchServer{name: name, server: filepath.Join(dir, name, product+"-server"), cli: filepath.Join(dir, name, product+"-cli")}
	for _, p := range []string{s.server, s.cli} {
		if _, err := os.Stat(p); err != nil {
			return s, false
		}
	}
	return s, true
}

// benchServers are the servers $BENCH_SERVERS names ("redis-7.0,redis-8.0,valkey-8.1"), or
// by default the host's redis-7.0 and then every server of the servers cache (a tree being
// made is a hidden directory). The host's
// is what REDIS_SERVER and REDIS_CLI name (by default /usr/bin/redis-server and redis-cli
// from PATH); the others are the cache's wrappers. A server named but not there fails the
// benchmark.
func benchServers(b *testing.B) []benchServer {
	b.Helper()
	dir, err := serversDir()
	if err != nil {
		b.Fatal(err)
	}
	host := benchServer{name: hostServer, server: redistest.Binary(), cli: redistest.CLI()}
	list := os.Getenv(envBenchServers)
	if list == "" {
		servers := []benchServer{host}
		entries, _ := os.ReadDir(dir) // none yet: the host's only
		for _, e := range entries {
			if s, ok := cachedServer(dir, e.Name()); ok && e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != hostServer {
				servers = append(servers, s)
			}
		}
		return servers
	}
	var servers []benchServer
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == hostServer {
			servers = append(servers, host)
			continue
		}
		s, ok := cachedServer(dir, name)
		if !ok {
			b.Fatalf("%s names %s, which is not in %s (make bench-servers puts redis-8.0 and valkey-8.1 there)", envBenchServers, name, dir)
		}
		servers = append(servers, s)
	}
	return servers
}

// run runs f as s's sub-benchmark, with REDIS_SERVER and REDIS_CLI set to s's for every
// node and CLI it starts, once checkServer found that they really are s.
func (s benchServer) run(b *testing.B, f func(b *testing.B, server string)) {
	b.Run(s.name, func(b *testing.B) {
		b.Setenv("REDIS_SERVER", s.server)
		b.Setenv("REDIS_CLI", s.cli)
		if got := checkServer(b); got != s.name {
			b.Fatalf("server %s: %s and %s are %s", s.name, s.server, s.cli, got)
		}
		f(b, serverLabel(s.name))
	})
}

// checkServer starts one node as redistest starts them (REDIS_SERVER), reads its INFO
// server and the version of redistest.CLI(), prints a line naming both and returns the
// server's name ("valkey-8.1"). A CLI of another product or version than the server's
// fails the benchmark: each server is compared with its own CLI.
func checkServer(b *testing.B) string {
	b.Helper()
	n := redistest.StartOne(b, redistest.Options{})
	info, err := n.Client().Info(b.Context(), "server").Result()
	n.Kill()
	if err != nil {
		b.Fatalf("INFO server of %s: %v", redistest.Binary(), err)
	}
	name, version, err := serverName(info)
	if err != nil {
		b.Fatalf("%s: %v", redistest.Binary(), err)
	}
	out, err := exec.Command(redistest.CLI(), "--version").CombinedOutput()
	if err != nil {
		b.Fatalf("%s --version: %v\n%s", redistest.CLI(), err, out)
	}
	cli, cliVersion, err := cliName(string(out))
	if err != nil {
		b.Fatalf("%s: %v", redistest.CLI(), err)
	}
	fmt.Printf("bench: server %s: %s (%s), %s (%s)\n", name, version, redistest.Binary(), cliVersion, redistest.CLI())
	if cli != name {
		b.Fatalf("server %s (%s) with the CLI of %s (%s): set REDIS_CLI to its own", name, redistest.Binary(), cli, redistest.CLI())
	}
	return name
}

// serverName names the server of an INFO server reply by product and major.minor
// ("redis-8.0", "valkey-8.1"), with its version as INFO gives it: Valkey's valkey_version
// (its redis_version is the 7.2.4 it stays compatible with), else redis_version.
func serverName(info string) (name, version string, err error) {
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	product := "valkey"
	v, ok := fields["valkey_version"]
	if !ok {
		product = "redis"
		if v, ok = fields["redis_version"]; !ok {
			return "", "", fmt.Errorf("no redis_version nor valkey_version in INFO server")
		}
	}
	mm, err := majorMinor(v)
	if err != nil {
		return "", "", err
	}
	return product + "-" + mm, product + "_version " + v, nil
}

// cliName names a CLI by its --version line ("redis-cli 8.0.2", "valkey-cli 8.1.1"),
// as serverName names servers, with that line's program and version as its version.
func cliName(out string) (name, version string, err error) {
	f := strings.Fields(out)
	if len(f) < 2 || !slices.Contains([]string{"redis-cli", "valkey-cli"}, f[0]) {
		return "", "", fmt.Errorf("not a redis-cli or valkey-cli version: %q", out)
	}
	mm, err := majorMinor(f[1])
	if err != nil {
		return "", "", err
	}
	return strings.TrimSuffix(f[0], "-cli") + "-" + mm, f[0] + " " + f[1], nil
}

// majorMinor is "8.0" of "8.0.2".
func majorMinor(v string) (string, error) {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return "", fmt.Errorf("no major.minor in version %q", v)
	}
	return parts[0] + "." + parts[1], nil
}

func TestBenchServerNames(t *testing.T) {
	for _, c := range []struct{ info, name, version string }{
		{"# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n", "redis-7.0", "redis_version 7.0.15"},
		{"# Server\r\nredis_version:8.0.2\r\nredis_mode:cluster\r\n", "redis-8.0", "redis_version 8.0.2"},
		{"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.1\r\n", "valkey-8.1", "valkey_version 8.1.1"},
	} {
		name, version, err := serverName(c.info)
		if err != nil || name != c.name || version != c.version {
			t.Errorf("serverName(%q) = %q, %q, %v; want %q, %q", c.info, name, version, err, c.name, c.version)
		}
	}
	if _, _, err := serverName("# Server\r\n"); err == nil {
		t.Error("serverName of no version: no error")
	}
	for out, want := range map[string]string{"redis-cli 7.0.15\n": "redis-7.0", "redis-cli 8.0.2\n": "redis-8.0", "valkey-cli 8.1.1\n": "valkey-8.1"} {
		if name, _, err := cliName(out); err != nil || name != want {
			t.Errorf("cliName(%q) = %q, %v; want %q", out, name, err, want)
		}
	}
	if _, _, err := cliName("redis-benchmark 7.0.15"); err == nil {
		t.Error("cliName of redis-benchmark: no error")
	}
	if got := serverLabel("valkey-8.1"); got != "valkey 8.1" {
		t.Errorf("serverLabel(valkey-8.1) = %q", got)
	}
}
