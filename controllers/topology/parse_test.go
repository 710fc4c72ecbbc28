package topology

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustNodes(t *testing.T, name string) []NodeRecord {
	t.Helper()
	recs, err := ParseClusterNodes(fixture(t, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return recs
}

func byID(recs []NodeRecord, prefix string) *NodeRecord {
	for i := range recs {
		if strings.HasPrefix(recs[i].ID, prefix) {
			return &recs[i]
		}
	}
	return nil
}

func TestParseClusterNodesFixtures(t *testing.T) {
	// Every captured CLUSTER NODES output parses.
	files, _ := filepath.Glob("testdata/*.cluster-nodes.txt")
	if len(files) < 10 {
		t.Fatalf("only %d fixtures", len(files))
	}
	for _, f := range files {
		if _, err := ParseClusterNodes(fixture(t, filepath.Base(f))); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseClusterNodesHealthy(t *testing.T) {
	recs := mustNodes(t, "healthy-3x1.cluster-nodes.txt")
	if len(recs) != 6 {
		t.Fatalf("%d records", len(recs))
	}
	me := byID(recs, "674621af")
	if !me.Flags.Myself || !me.Flags.Master || me.IP != "127.0.0.2" || me.Port != 6379 || me.BusPort != 16379 {
		t.Fatalf("myself = %+v", me)
	}
	if me.ConfigEpoch != 1 || !me.Connected || FormatRanges(me.Slots) != "0-5460" || me.SlotCount() != 5461 {
		t.Fatalf("myself = %+v", me)
	}
	rep := byID(recs, "928eb96a")
	if !rep.Flags.Replica || rep.MasterID != "7506852052dcaab8c273a68ffbb71cc06c61e9f9" || len(rep.Slots) != 0 || rep.Addr() != "127.0.0.7:6379" {
		t.Fatalf("replica = %+v", rep)
	}
	total := 0
	for _, r := range recs {
		total += r.SlotCount()
	}
	if total != NumSlots {
		t.Fatalf("slots total %d", total)
	}
}

func TestParseClusterNodesOpenSlots(t *testing.T) {
	imp := byID(mustNodes(t, "open-slot.importing-side.cluster-nodes.txt"), "674621af")
	if imp.Importing[5461] != "7506852052dcaab8c273a68ffbb71cc06c61e9f9" || len(imp.Migrating) != 0 {
		t.Fatalf("importing side: %+v", imp)
	}
	if FormatRanges(imp.Slots) != "0-5460" {
		t.Fatalf("open slot counted as owned: %v", imp.Slots)
	}
	mig := byID(mustNodes(t, "open-slot.migrating-side.cluster-nodes.txt"), "75068520")
	if mig.Migrating[5461] != "674621af07b2b4da279dafcee969efb87cb26e0f" || !mig.Flags.Myself {
		t.Fatalf("migrating side: %+v", mig)
	}
}

func TestParseClusterNodesFailureStates(t *testing.T) {
	hs := byID(mustNodes(t, "handshake.cluster-nodes.txt"), "bd45287e")
	if !hs.Flags.Handshake || hs.Connected || hs.Addr() != "127.0.0.99:6379" {
		t.Fatalf("handshake: %+v", hs)
	}
	pf := byID(mustNodes(t, "master-down.pfail.cluster-nodes.txt"), "6c4100c6")
	if pf.Connected || pf.Failing() || pf.SlotCount() != 5461 || pf.PingSent != 1795975256591 {
		t.Fatalf("pfail (before fail?): %+v", pf)
	}
	recs := mustNodes(t, "master-down.failed-and-promoted.cluster-nodes.txt")
	dead := byID(recs, "6c4100c6")
	if !dead.Flags.Fail || !dead.Flags.Master || dead.SlotCount() != 0 {
		t.Fatalf("failed master: %+v", dead)
	}
	if p := byID(recs, "5ee39e60"); !p.Flags.Master || p.ConfigEpoch != 7 || FormatRanges(p.Slots) != "10923-16383" {
		t.Fatalf("promoted: %+v", p)
	}
	for _, r := range mustNodes(t, "full-restart-new-ips.cluster-nodes.txt") {
		if !r.Flags.Myself && (!r.Flags.PFail || r.Connected) {
			t.Fatalf("full restart peer not fail?/disconnected: %+v", r)
		}
	}
	self := byID(mustNodes(t, "replica-new-ip.self-view.cluster-nodes.txt"), "57f0178f")
	if !self.Flags.Myself || !self.Flags.Replica || self.IP != "127.0.0.8" {
		t.Fatalf("self view: %+v", self)
	}
}

func TestParseClusterNodesForms(t *testing.T) {
	id := strings.Repeat("a", 40)
	other := strings.Repeat("b", 40)
	// A fresh node does not know its own IP; Redis 7 may append a hostname.
	recs, err := ParseClusterNodes(id + " :6379@16379 myself,master - 0 0 0 connected\n" +
		other + " 10.0.0.1:7000@17000,pod-1.svc slave,nofailover " + id + " 0 0 0 connected\n")
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].IP != "" || recs[0].Addr() != "" || recs[1].Hostname != "pod-1.svc" || !recs[1].Flags.NoFailover {
		t.Fatalf("%+v", recs)
	}
	// IPv6 addresses keep their colons; the port is after the last one.
	recs, err = ParseClusterNodes(id + " ::1:6379@16379 myself,master - 0 0 3 connected 0 2-3 5\n")
	if err != nil || recs[0].IP != "::1" || recs[0].Port != 6379 || FormatRanges(recs[0].Slots) != "0,2-3,5" {
		t.Fatalf("%+v %v", recs, err)
	}
}

func TestParseClusterNodesErrors(t *testing.T) {
	id := strings.Repeat("a", 40)
	good := id + " 1.2.3.4:6379@16379 myself,master - 0 0 1 connected 0-10"
	cases := map[string]string{
		"empty":            "",
		"short":            id + " 1.2.3.4:6379@16379 master -",
		"bad id":           "xyz 1.2.3.4:6379@16379 master - 0 0 1 connected",
		"no bus port":      id + " 1.2.3.4:6379 master - 0 0 1 connected",
		"bad port":         id + " 1.2.3.4:x@16379 master - 0 0 1 connected",
		"bad ip":           id + " 1.2.3.999:6379@16379 master - 0 0 1 connected",
		"bad master":       id + " 1.2.3.4:6379@16379 slave zz 0 0 1 connected",
		"bad ping":         id + " 1.2.3.4:6379@16379 master - x 0 1 connected",
		"bad epoch":        id + " 1.2.3.4:6379@16379 master - 0 0 -1 connected",
		"bad link":         id + " 1.2.3.4:6379@16379 master - 0 0 1 maybe",
		"slot range":       id + " 1.2.3.4:6379@16379 master - 0 0 1 connected 10-5",
		"slot too big":     id + " 1.2.3.4:6379@16379 master - 0 0 1 connected 16384",
		"slot twice":       id + " 1.2.3.4:6379@16379 master - 0 0 1 connected 0-10 5",
		"bad open slot":    id + " 1.2.3.4:6379@16379 master - 0 0 1 connected [5->-zz]",
		"open slot syntax": id + " 1.2.3.4:6379@16379 master - 0 0 1 connected [5-?-" + id + "]",
		"duplicate":        good + "\n" + strings.Replace(good, "myself,", "", 1),
		"two myself":       good + "\n" + strings.Replace(good, id, strings.Repeat("c", 40), 1),
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseClusterNodes(text); !errors.Is(err, ErrParse) {
				t.Fatalf("error %v, want ErrParse", err)
			}
		})
	}
	// Truncating a real reply anywhere never panics: it parses or fails cleanly.
	full := fixture(t, "open-slot.importing-side.cluster-nodes.txt")
	for i := range len(full) {
		_, _ = ParseClusterNodes(full[:i])
	}
}

func TestParseClusterInfo(t *testing.T) {
	info, err := ParseClusterInfo(fixture(t, "healthy-3x1.cluster-info.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !info.OK() || info.SlotsAssigned != NumSlots || info.SlotsOK != NumSlots || info.KnownNodes != 6 ||
		info.Size != 3 || info.CurrentEpoch != 6 || info.MyEpoch != 1 || info.Fields["cluster_stats_messages_sent"] != "55" {
		t.Fatalf("%+v", info)
	}
	info, err = ParseClusterInfo(fixture(t, "full-restart-new-ips.cluster-info.txt"))
	if err != nil || info.OK() || info.SlotsOK != 5461 {
		t.Fatalf("%+v %v", info, err)
	}
	for _, bad := range []string{"", "cluster_state:maybe\r\n", "cluster_state:ok\r\ncluster_size:x\r\n", "cluster_state:ok\r\ncluster_my_epoch:-1\r\n"} {
		if _, err := ParseClusterInfo(bad); !errors.Is(err, ErrParse) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParseReplicationInfo(t *testing.T) {
	ri, err := ParseReplicationInfo(fixture(t, "master.info-replication.txt"))
	if err != nil || ri.Role != "master" || ri.ConnectedReplica != 1 || ri.Offset != 0 {
		t.Fatalf("%+v %v", ri, err)
	}
	ri, err = ParseReplicationInfo("# Replication\r\nrole:slave\r\nmaster_host:127.0.0.3\r\nmaster_port:6379\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\nslave_repl_offset:1234\r\n")
	if err != nil || !ri.MasterLinkUp || ri.SyncInProgress || ri.Offset != 1234 || ri.MasterAddr != "127.0.0.3:6379" {
		t.Fatalf("%+v %v", ri, err)
	}
	if _, err := ParseReplicationInfo("role:sentinel\r\n"); !errors.Is(err, ErrParse) {
		t.Fatal(err)
	}
}

func TestSlotRanges(t *testing.T) {
	var s SlotSet
	s.AddRange(SlotRange{0, 9})
	s.Add(20)
	s.Remove(5)
	if got := FormatRanges(s.Ranges()); got != "0-4,6-9,20" || s.Len() != 10 {
		t.Fatalf("%s %d", got, s.Len())
	}
	if _, err := ParseSlotRange("7-3"); err == nil {
		t.Fatal("7-3 accepted")
	}
	if r, err := ParseSlotRange("16383"); err != nil || r.Len() != 1 {
		t.Fatal(r, err)
	}
}

func TestParseNodeInfo(t *testing.T) {
	text := "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:42\r\n\r\n# Keyspace\r\ndb0:keys=12,expires=1,avg_ttl=0\r\ndb3:keys=3,expires=0,avg_ttl=0\r\n\r\n# Server\r\nredis_version:7.0.15\r\nrun_id:0123abcd\r\n"
	ri, keys, runID, err := ParseNodeInfo(text)
	if err != nil || ri.Role != "master" || ri.Offset != 42 || keys != 15 || runID != "0123abcd" {
		t.Fatalf("%+v %d %q %v", ri, keys, runID, err)
	}
	if _, keys, _, err := ParseNodeInfo("role:slave\r\n# Keyspace\r\nrun_id:x\r\n"); err != nil || keys != 0 {
		t.Fatalf("empty keyspace: %d %v", keys, err)
	}
	for _, bad := range []string{"role:master\r\n", "role:master\r\nrun_id:x\r\ndb0:expires=1\r\n", "role:master\r\nrun_id:x\r\ndb0:keys=-1\r\n"} {
		if _, _, _, err := ParseNodeInfo(bad); !errors.Is(err, ErrParse) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The shape of CLUSTER NODES ignores ping and pong times and line order, nothing else.
func TestNodesShape(t *testing.T) {
	text := fixture(t, "healthy-3x1.cluster-nodes.txt")
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var moved []string
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		f[4], f[5] = "1", "2"
		moved = append(moved, strings.Join(f, " "))
	}
	if nodesShape(text) != nodesShape(strings.Join(moved, "\n")) {
		t.Fatal("ping/pong times or line order changed the shape")
	}
	for _, change := range []struct{ from, to string }{{"master", "master,fail?"}, {" connected", " disconnected"}, {"0-5460", "0-5459"}} {
		if changed := strings.Replace(text, change.from, change.to, 1); nodesShape(changed) == nodesShape(text) {
			t.Errorf("%q → %q left the shape alone", change.from, change.to)
		}
	}
}
