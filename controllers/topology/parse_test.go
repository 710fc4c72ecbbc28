package topology

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
		"unknown flag":     id + " 1.2.3.4:6379@16379 master,weird - 0 0 1 connected",
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

// parseCLIReply decodes redis-cli's human (--no-raw) rendering of a reply, as in the
// captured CLUSTER SHARDS fixture, into what go-redis returns for RESP2: nested []any with
// string and int64 leaves. Nesting follows the column of each index's ")".
func parseCLIReply(t *testing.T, text string) any {
	t.Helper()
	type level struct {
		col  int
		list []any
	}
	var stack []*level
	closeTo := func(col int) { // pop levels deeper than col into their parent's last element
		for len(stack) > 1 && stack[len(stack)-1].col > col {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			parent := stack[len(stack)-1]
			parent.list[len(parent.list)-1] = top.list
		}
	}
	index := regexp.MustCompile(`^\s*\d+\) `)
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		pos := 0
		for {
			loc := index.FindStringIndex(line[pos:])
			if loc == nil {
				break
			}
			col := pos + loc[1] - 2 // column of ")"
			closeTo(col)
			if len(stack) == 0 || stack[len(stack)-1].col < col {
				if len(stack) > 0 { // a nested list starts as the parent's current element
					parent := stack[len(stack)-1]
					if parent.list[len(parent.list)-1] != nil {
						t.Fatalf("bad nesting at %q", line)
					}
				}
				stack = append(stack, &level{col: col})
			}
			top := stack[len(stack)-1]
			top.list = append(top.list, nil)
			pos += loc[1]
		}
		val := strings.TrimSpace(line[pos:])
		top := stack[len(stack)-1]
		switch {
		case strings.HasPrefix(val, `"`):
			s, err := strconv.Unquote(val)
			if err != nil {
				t.Fatalf("%q: %v", val, err)
			}
			top.list[len(top.list)-1] = s
		case strings.HasPrefix(val, "(integer) "):
			n, err := strconv.ParseInt(strings.TrimPrefix(val, "(integer) "), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			top.list[len(top.list)-1] = n
		case val == "(empty array)":
			top.list[len(top.list)-1] = []any{}
		default:
			t.Fatalf("unexpected value %q", val)
		}
	}
	closeTo(-1)
	return stack[0].list
}

func TestParseClusterShardsFixture(t *testing.T) {
	reply := parseCLIReply(t, fixture(t, "healthy-3x1.cluster-shards.txt"))
	shards, err := ParseClusterShards(reply)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 3 {
		t.Fatalf("%d shards", len(shards))
	}
	s0 := shards[0]
	if len(s0.Slots) != 1 || s0.Slots[0] != (SlotRange{0, 5460}) || len(s0.Nodes) != 2 {
		t.Fatalf("%+v", s0)
	}
	m, r := s0.Nodes[0], s0.Nodes[1]
	if m.ID != "674621af07b2b4da279dafcee969efb87cb26e0f" || m.Role != "master" || m.Health != "online" || m.IP != "127.0.0.2" || m.Port != 6379 {
		t.Fatalf("master %+v", m)
	}
	if r.Role != "replica" || r.Health != "loading" || r.Endpoint != "127.0.0.6" {
		t.Fatalf("replica %+v", r)
	}
	total := 0
	for _, s := range shards {
		total += countRanges(s.Slots)
	}
	if total != NumSlots {
		t.Fatalf("%d slots", total)
	}
}

func TestParseClusterShardsShapes(t *testing.T) {
	id := strings.Repeat("a", 40)
	node := []any{"id", id, "port", int64(6379), "ip", "10.0.0.1", "endpoint", "10.0.0.1", "role", "master", "replication-offset", int64(7), "health", "online"}
	resp2 := []any{[]any{"slots", []any{int64(0), int64(99), int64(200), int64(300)}, "nodes", []any{node}}}
	got, err := ParseClusterShards(resp2)
	if err != nil || FormatRanges(got[0].Slots) != "0-99,200-300" || got[0].Nodes[0].ReplicationOffset != 7 {
		t.Fatalf("%+v %v", got, err)
	}
	resp3 := []any{map[any]any{"slots": []any{int64(0), int64(16383)}, "nodes": []any{map[any]any{
		"id": id, "port": int64(1), "role": "replica", "health": "failed"}}}}
	if got, err := ParseClusterShards(resp3); err != nil || got[0].Nodes[0].Health != "failed" {
		t.Fatalf("%+v %v", got, err)
	}
	bad := []any{
		"text",
		[]any{"x"},
		[]any{[]any{"slots", []any{int64(5)}, "nodes", []any{}}},
		[]any{[]any{"slots", []any{int64(9), int64(5)}, "nodes", []any{}}},
		[]any{[]any{"slots", []any{}, "nodes", "x"}},
		[]any{[]any{"slots", []any{}, "nodes", []any{[]any{"id", "short", "port", int64(1), "role", "master", "health", "online"}}}},
		[]any{[]any{"slots", []any{}, "nodes", []any{[]any{"id", id, "port", int64(1), "role", "boss", "health", "online"}}}},
		[]any{[]any{"slots", []any{}, "nodes", []any{[]any{"id", id, "port", "x", "role", "master", "health", "online"}}}},
	}
	for i, b := range bad {
		if _, err := ParseClusterShards(b); !errors.Is(err, ErrParse) {
			t.Errorf("case %d: %v", i, err)
		}
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
