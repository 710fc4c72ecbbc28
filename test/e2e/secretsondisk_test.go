//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// checkNoSecretOnDisk fails t when any file of the data volumes of
// namespace ns (the plane keeps each claim's volume under
// <state>/volumes/<ns>/) contains one of secrets: redis.conf, nodes.conf,
// the RDB and AOF files, whatever Redis or the start script wrote there.
// Secret volumes are not data volumes: on a real node they are tmpfs, and
// the plane keeps them in the pod's own directory, not here.
func checkNoSecretOnDisk(t testing.TB, ns string, secrets ...string) {
	t.Helper()
	root := filepath.Join(env.stateDir, "volumes", ns)
	found, files, err := redistest.FilesContaining(root, secrets...)
	if err != nil {
		t.Fatalf("reading the data volumes of %s: %v", ns, err)
	}
	for _, f := range found {
		t.Errorf("%s on a data volume holds a password in plain text", f)
	}
	if files == 0 {
		t.Fatalf("no file under %s: the check looked in the wrong place", root)
	}
	if len(found) == 0 {
		t.Logf("%d files on the data volumes of %s hold no password", files, ns)
	}
}

// checkSecretsHidden fails c's test when any of secrets shows in the
// RedisCluster (as YAML, status included), in the operator's log or in an
// event of the cluster, naming only the secret's index. It returns the
// operator's log, for the caller's check that the log it searched is the
// one that recorded the scenario.
func (c *cluster) checkSecretsHidden(secrets []string) string {
	c.t.Helper()
	status, err := objectYAML(c.get())
	if err != nil {
		c.t.Fatal(err)
	}
	env.opLogs.flush()
	raw, err := os.ReadFile(env.opLog)
	if err != nil {
		c.t.Fatal(err)
	}
	logText := string(raw)
	events := c.events()
	for i, s := range secrets {
		if strings.Contains(string(status), s) {
			c.t.Fatalf("the RedisCluster shows secret #%d", i)
		}
		if strings.Contains(logText, s) {
			c.t.Fatalf("the operator's log shows secret #%d", i)
		}
		for _, e := range events {
			if strings.Contains(e.Message, s) {
				c.t.Fatalf("event %s shows secret #%d", e.Reason, i)
			}
		}
	}
	return logText
}
