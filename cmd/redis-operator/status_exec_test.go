package main

import (
	"bytes"
	"strings"
	"testing"
)

// The outputs below are what sampleScript printed against redis-server and
// redis-cli 7.0.15 (Debian): with the right password, a wrong one, none,
// and with nothing listening.
const (
	sampleOK = "@@redis-operator-status@@ nodes\n" +
		"3c33730ba397ddb3f2a8e336a6c60a32aac2bbad :6379@16379 myself,master - 0 0 0 connected\n" +
		"@@redis-operator-status@@ info\ncluster_state:fail\ncluster_slots_assigned:0\n" +
		"@@redis-operator-status@@ node\n# Replication\nrole:master\n"
	sampleWrongPassword = "@@redis-operator-status@@ nodes\n" +
		"AUTH failed: WRONGPASS invalid username-password pair or user is disabled.\nNOAUTH Authentication required.\n" +
		"@@redis-operator-status@@ info\n" +
		"AUTH failed: WRONGPASS invalid username-password pair or user is disabled.\nNOAUTH Authentication required.\n" +
		"@@redis-operator-status@@ node\n" +
		"AUTH failed: WRONGPASS invalid username-password pair or user is disabled.\nNOAUTH Authentication required.\n"
	sampleNoPassword = "@@redis-operator-status@@ nodes\nNOAUTH Authentication required.\n" +
		"@@redis-operator-status@@ info\nNOAUTH Authentication required.\n" +
		"@@redis-operator-status@@ node\nNOAUTH Authentication required.\n"
	sampleDown = "@@redis-operator-status@@ nodes\nCould not connect to Redis at 10.244.0.9:6379: Connection refused\n" +
		"@@redis-operator-status@@ info\nCould not connect to Redis at 10.244.0.9:6379: Connection refused\n" +
		"@@redis-operator-status@@ node\nCould not connect to Redis at 10.244.0.9:6379: Connection refused\n"
)

func TestSplitSample(t *testing.T) {
	s := splitSample(sampleOK)
	if s.Err != nil || !strings.HasPrefix(s.ClusterNodes, "3c33730b") || !strings.HasPrefix(s.ClusterInfo, "cluster_state:fail") ||
		!strings.HasPrefix(s.Info, "# Replication") {
		t.Fatalf("%+v", s)
	}
	for name, out := range map[string]string{
		"wrong password": sampleWrongPassword, "no password": sampleNoPassword, "down": sampleDown,
		"truncated": "@@redis-operator-status@@ nodes\n", "empty": "",
	} {
		if s := splitSample(out); s.Err == nil {
			t.Errorf("%s: no error from %+v", name, s)
		}
	}
	if s := splitSample(sampleWrongPassword); !strings.Contains(s.Err.Error(), "WRONGPASS") {
		t.Errorf("the error does not say why: %v", s.Err)
	}
}

func TestStatusUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"a", "b"}, {"a", "-o", "yaml"}, {"-n"}} {
		var out, errOut bytes.Buffer
		if code := runStatus(args, &out, &errOut); code != 2 || out.Len() != 0 || !strings.Contains(errOut.String(), "usage:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := runPlugin([]string{"scale"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "kubectl rediscluster status") {
		t.Errorf("unknown plugin subcommand: exit %d, stderr %q", code, errOut.String())
	}
	if !isPlugin("/usr/local/bin/kubectl-rediscluster") || isPlugin("bin/redis-operator") {
		t.Error("isPlugin misreads argv[0]")
	}
}
