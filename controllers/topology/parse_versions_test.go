package topology

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Replies of newer servers than the 7.0.15 these machines run, copied from
// their documentation into testdata/versions (each file's header names its
// source): the parsers and the planner must take them as they take 7.0's.

// versionFixture reads testdata/versions/name without its leading "#"
// header lines (INFO's "# Server"-style section headers are kept).
func versionFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "versions", name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "#") && !isInfoSection(lines[i]) {
		i++
	}
	return strings.Join(lines[i:], "\n")
}

// isInfoSection tells INFO's section headers ("# Server") from comment lines.
func isInfoSection(line string) bool {
	switch strings.TrimPrefix(line, "# ") {
	case "Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU", "Keyspace", "Keysizes", "Cluster":
		return true
	}
	return false
}

func TestParseNewerClusterNodes(t *testing.T) {
	recs, err := ParseClusterNodes(versionFixture(t, "valkey-7.2.4.cluster-nodes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	me := byID(recs, "e7d1eecc")
	if len(recs) != 6 || me == nil || !me.Flags.Myself || me.IP != "127.0.0.1" || me.Port != 30001 || me.BusPort != 31001 ||
		me.Hostname != "hostname1" || FormatRanges(me.Slots) != "0-5460" || me.Aux != nil {
		t.Fatalf("myself = %+v (of %d)", me, len(recs))
	}

	recs, err = ParseClusterNodes(versionFixture(t, "aux-fields.cluster-nodes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Aux["shard-id"] == "" || r.IP != "127.0.0.1" || r.BusPort != r.Port+1000 {
			t.Fatalf("%s: address or shard-id not read: %+v", r.ID, r)
		}
	}
	noHost := byID(recs, "07c37dfe")
	withHost := byID(recs, "67ed2db8")
	auxFirst := byID(recs, "292f8b36")
	if noHost.Hostname != "" || noHost.Aux["tls-port"] != "0" || withHost.Hostname != "hostname2" ||
		auxFirst.Hostname != "" || auxFirst.Aux["nodename"] != "node3" || auxFirst.Aux["tcp-port"] != "30003" {
		t.Fatalf("hostname or aux fields misread:\n%+v\n%+v\n%+v", noHost, withHost, auxFirst)
	}
	// A flag this parser does not know is kept aside; the known ones still count.
	odd := byID(recs, "6ec23923")
	if !odd.Flags.Replica || !odd.Flags.NoFailover || odd.Flags.Other != "imported" || odd.MasterID != withHost.ID ||
		odd.Flags.String() != "slave,nofailover,imported" {
		t.Fatalf("flags = %+v (%s)", odd.Flags, odd.Flags.String())
	}
	// The shape that decides whether the cluster changed ignores only ping/pong times.
	text := versionFixture(t, "aux-fields.cluster-nodes.txt")
	if nodesShape(text) == nodesShape(strings.Replace(text, "shard-id=1a4b", "shard-id=9a4b", 1)) {
		t.Fatal("a changed shard-id does not change the shape")
	}
}

func TestParseNewerClusterNodesErrors(t *testing.T) {
	id := strings.Repeat("a", 40)
	for name, line := range map[string]string{
		"empty flag":         id + " 1.2.3.4:6379@16379 master,,fail - 0 0 1 connected",
		"hostname after aux": id + " 1.2.3.4:6379@16379,,shard-id=x,host - 0 0 1 connected",
		"aux without key":    id + " 1.2.3.4:6379@16379,,=x master - 0 0 1 connected",
	} {
		if _, err := ParseClusterNodes(line); err == nil {
			t.Errorf("%s: parsed %q", name, line)
		}
	}
}

func TestParseNewerInfo(t *testing.T) {
	ci, err := ParseClusterInfo(versionFixture(t, "valkey-8.cluster-info.txt"))
	if err != nil || !ci.OK() || ci.SlotsOK != NumSlots || ci.KnownNodes != 6 || ci.Size != 3 || ci.MyEpoch != 2 {
		t.Fatalf("%+v %v", ci, err)
	}
	info := versionFixture(t, "valkey-8.info.txt")
	ri, keys, runID, err := ParseNodeInfo(info)
	if err != nil || ri.Role != "master" || keys != 0 || runID != "e0abe2248cad0c6d9cb2445d8e6b73448f567f74" {
		t.Fatalf("%+v keys %d run %q: %v", ri, keys, runID, err)
	}
	// Redis 7.4's subexpiry and Redis 8's Keysizes section (db0_distrib_*) after Valkey's
	// sections: keys are the dbN lines' keys= only.
	_, keys, _, err = ParseNodeInfo(strings.TrimSuffix(info, "# Keyspace\n") + versionFixture(t, "redis-8.keyspace.txt"))
	if err != nil || keys != 22 {
		t.Fatalf("keys %d, want 22: %v", keys, err)
	}
}

// TestPlanNewerClusterConverged: a settled 3×1 cluster whose nodes print
// the aux fields and an unknown flag needs no step.
func TestPlanNewerClusterConverged(t *testing.T) {
	text := versionFixture(t, "aux-fields.cluster-nodes.txt")
	ids := map[string]string{
		"s0-0": "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca", "s0-1": "07c37dfeb235213a872192d90877d0cd55635b91",
		"s1-0": "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1", "s1-1": "6ec23923021cf3ffec47632106199cb7f496ce01",
		"s2-0": "292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f", "s2-1": "824fe116063bc5fcf9f4ffd895bc17aee7731ac3",
	}
	ep := func(name, port string) Endpoint { return Endpoint{Name: name, Addr: "127.0.0.1:" + port} }
	d := Desired{Shards: []ShardSpec{
		{Name: "s0", Nodes: []Endpoint{ep("s0-0", "30001"), ep("s0-1", "30004")}},
		{Name: "s1", Nodes: []Endpoint{ep("s1-0", "30002"), ep("s1-1", "30005")}},
		{Name: "s2", Nodes: []Endpoint{ep("s2-0", "30003"), ep("s2-1", "30006")}},
	}, ReplicasPerShard: 1}
	v := &ClusterView{ObservedAt: time.UnixMilli(1426238320000)}
	for _, e := range d.endpoints() {
		v.Nodes = append(v.Nodes, nodeFromTable(t, text, e, ids[e.Name]))
	}
	steps, err := Plan(v, d)
	if err != nil || len(steps) != 0 {
		t.Fatalf("steps %v, error %v; want none", steps, err)
	}
}
