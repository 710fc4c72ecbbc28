package topology

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// NodeFlags are the flags of one CLUSTER NODES entry (spec: "Cluster node attributes";
// command page CLUSTER NODES).
type NodeFlags struct {
	Myself     bool
	Master     bool
	Replica    bool // "slave"
	PFail      bool // "fail?": this node cannot reach it (possible failure)
	Fail       bool // "fail": a majority of masters agreed it failed
	Handshake  bool // first contact not completed
	NoAddr     bool // address unknown
	NoFailover bool
	// Other holds flags this parser does not know, comma-separated in
	// reply order ("" when none): a newer Redis or Valkey may print more
	// than the 7.0 command page lists, and a node is then judged by the
	// flags above alone.
	Other string
}

// String joins the flags as Redis prints them.
func (f NodeFlags) String() string {
	var parts []string
	add := func(b bool, s string) {
		if b {
			parts = append(parts, s)
		}
	}
	add(f.Myself, "myself")
	add(f.Master, "master")
	add(f.Replica, "slave")
	add(f.PFail, "fail?")
	add(f.Fail, "fail")
	add(f.Handshake, "handshake")
	add(f.NoAddr, "noaddr")
	add(f.NoFailover, "nofailover")
	add(f.Other != "", f.Other)
	if len(parts) == 0 {
		return "noflags"
	}
	return strings.Join(parts, ",")
}

// NodeRecord is one line of CLUSTER NODES: what the answering node believes about a node.
type NodeRecord struct {
	ID       string // 40 hex characters
	IP       string // empty when the node does not know it (a fresh node's own entry)
	Port     int
	BusPort  int
	Hostname string // Redis 7 "ip:port@cport,hostname" form; usually empty
	// Aux holds the "key=value" fields that may follow the hostname
	// ("ip:port@cport,hostname,shard-id=…,tls-port=0"): Redis 7.2+ and
	// Valkey write them to nodes.conf (shard-id, nodename, tcp-port,
	// tls-port) and Valkey's address string carries them; nil when none.
	Aux      map[string]string
	Flags    NodeFlags
	MasterID string // for a replica, the ID of its master; empty otherwise
	// PingSent and PongRecv are Unix times in milliseconds (0: none pending / never).
	PingSent, PongRecv int64
	ConfigEpoch        uint64
	Connected          bool // link-state "connected"
	Slots              []SlotRange
	// Importing maps a slot to the ID of the node it is being imported from ("[slot-<-id]");
	// Migrating maps a slot to the ID of the node it is being migrated to ("[slot->-id]").
	// Only the answering node's own entry carries them.
	Importing map[int]string
	Migrating map[int]string
}

// Addr is "ip:port", or "" when the IP is unknown.
func (r NodeRecord) Addr() string {
	if r.IP == "" {
		return ""
	}
	return net.JoinHostPort(r.IP, strconv.Itoa(r.Port))
}

// SlotCount is the number of slots in Slots.
func (r NodeRecord) SlotCount() int { return countRanges(r.Slots) }

// Failing reports fail or fail?.
func (r NodeRecord) Failing() bool { return r.Flags.Fail || r.Flags.PFail }

// ErrParse marks replies that do not have the documented shape.
var ErrParse = errors.New("unexpected reply")

func parseErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrParse, fmt.Sprintf(format, a...))
}

// ParseClusterNodes parses the reply of CLUSTER NODES (Redis 7.0 format:
// "<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <config-epoch>
// <link-state> <slot> ..."). Records come back in reply order. Bad or truncated output is an
// error naming the line, never a panic; at most one line may carry the myself flag.
func ParseClusterNodes(text string) ([]NodeRecord, error) {
	var out []NodeRecord
	seen := map[string]bool{}
	myself := 0
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		r, err := parseNodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES line %d: %w", i+1, err)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("CLUSTER NODES line %d: %w", i+1, parseErr("duplicate node ID %s", r.ID))
		}
		seen[r.ID] = true
		if r.Flags.Myself {
			myself++
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, parseErr("empty CLUSTER NODES reply")
	}
	if myself > 1 {
		return nil, parseErr("CLUSTER NODES has %d myself entries", myself)
	}
	return out, nil
}

func validID(id string) bool {
	if len(id) != 40 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func parseNodeLine(line string) (NodeRecord, error) {
	f := strings.Fields(line)
	if len(f) < 8 {
		return NodeRecord{}, parseErr("%d fields, want at least 8", len(f))
	}
	r := NodeRecord{ID: f[0]}
	if !validID(r.ID) {
		return r, parseErr("invalid node ID %q", r.ID)
	}
	if err := parseNodeAddr(f[1], &r); err != nil {
		return r, err
	}
	if err := parseFlags(f[2], &r.Flags); err != nil {
		return r, err
	}
	if f[3] != "-" {
		if !validID(f[3]) {
			return r, parseErr("invalid master ID %q", f[3])
		}
		r.MasterID = f[3]
	}
	var err error
	if r.PingSent, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return r, parseErr("ping-sent %q", f[4])
	}
	if r.PongRecv, err = strconv.ParseInt(f[5], 10, 64); err != nil {
		return r, parseErr("pong-recv %q", f[5])
	}
	if r.ConfigEpoch, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return r, parseErr("config-epoch %q", f[6])
	}
	switch f[7] {
	case "connected":
		r.Connected = true
	case "disconnected":
	default:
		return r, parseErr("link-state %q", f[7])
	}
	var ranges []SlotRange
	for _, tok := range f[8:] {
		if strings.HasPrefix(tok, "[") {
			if err := parseOpenSlot(tok, &r); err != nil {
				return r, err
			}
			continue
		}
		sr, err := ParseSlotRange(tok)
		if err != nil {
			return r, parseErr("%v", err)
		}
		ranges = append(ranges, sr)
	}
	// Sorted, checked for overlaps and merged where adjacent: the maximal ranges, without
	// expanding them slot by slot.
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].Start < ranges[j].Start })
	for _, sr := range ranges {
		last := len(r.Slots) - 1
		switch {
		case last >= 0 && sr.Start <= r.Slots[last].End:
			return r, parseErr("slot %d listed twice", sr.Start)
		case last >= 0 && sr.Start == r.Slots[last].End+1:
			r.Slots[last].End = sr.End
		default:
			r.Slots = append(r.Slots, sr)
		}
	}
	return r, nil
}

// parseNodeAddr parses "ip:port@cport[,hostname][,key=value]*" (the form of Redis 7.0's
// CLUSTER NODES, extended by Redis 7.2+ and Valkey with auxiliary fields; the hostname may
// be empty, as in "ip:port@cport,,shard-id=…", or absent before the first key=value); the
// IP may be empty (":6379@16379") or IPv6 (the port follows the last colon).
func parseNodeAddr(s string, r *NodeRecord) error {
	parts := strings.Split(s, ",")
	addr := parts[0]
	for i, p := range parts[1:] {
		k, v, isAux := strings.Cut(p, "=")
		switch {
		case isAux && k != "":
			if r.Aux == nil {
				r.Aux = map[string]string{}
			}
			r.Aux[k] = v
		case i == 0 && !isAux:
			r.Hostname = p
		default:
			return parseErr("address field %q in %q", p, s)
		}
	}
	hostPort, cport, ok := strings.Cut(addr, "@")
	if !ok {
		return parseErr("address %q lacks @cport", s)
	}
	colon := strings.LastIndexByte(hostPort, ':')
	if colon < 0 {
		return parseErr("address %q lacks a port", s)
	}
	r.IP = strings.Trim(hostPort[:colon], "[]")
	var err error
	if r.Port, err = strconv.Atoi(hostPort[colon+1:]); err != nil || r.Port < 0 || r.Port > 65535 {
		return parseErr("port in %q", s)
	}
	if r.BusPort, err = strconv.Atoi(cport); err != nil || r.BusPort < 0 || r.BusPort > 65535 {
		return parseErr("bus port in %q", s)
	}
	if r.IP != "" && net.ParseIP(r.IP) == nil {
		return parseErr("IP in %q", s)
	}
	return nil
}

func parseFlags(s string, f *NodeFlags) error {
	for _, fl := range strings.Split(s, ",") {
		switch fl {
		case "myself":
			f.Myself = true
		case "master":
			f.Master = true
		case "slave":
			f.Replica = true
		case "fail?":
			f.PFail = true
		case "fail":
			f.Fail = true
		case "handshake":
			f.Handshake = true
		case "noaddr":
			f.NoAddr = true
		case "nofailover":
			f.NoFailover = true
		case "noflags":
		case "":
			return parseErr("empty flag in %q", s)
		default:
			if f.Other != "" {
				f.Other += ","
			}
			f.Other += fl
		}
	}
	return nil
}

// parseOpenSlot parses "[slot->-id]" (migrating) and "[slot-<-id]" (importing).
func parseOpenSlot(tok string, r *NodeRecord) error {
	body, ok := strings.CutSuffix(strings.TrimPrefix(tok, "["), "]")
	if !ok {
		return parseErr("open slot %q", tok)
	}
	if slot, id, ok := strings.Cut(body, "->-"); ok {
		n, err := parseSlot(slot)
		if err != nil || !validID(id) {
			return parseErr("migrating slot %q", tok)
		}
		if r.Migrating == nil {
			r.Migrating = map[int]string{}
		}
		r.Migrating[n] = id
		return nil
	}
	if slot, id, ok := strings.Cut(body, "-<-"); ok {
		n, err := parseSlot(slot)
		if err != nil || !validID(id) {
			return parseErr("importing slot %q", tok)
		}
		if r.Importing == nil {
			r.Importing = map[int]string{}
		}
		r.Importing[n] = id
		return nil
	}
	return parseErr("open slot %q", tok)
}

// ClusterInfo is the reply of CLUSTER INFO (command page CLUSTER INFO).
type ClusterInfo struct {
	State         string // "ok" or "fail"
	SlotsAssigned int
	SlotsOK       int
	SlotsPFail    int
	SlotsFail     int
	KnownNodes    int
	Size          int // masters serving at least one slot
	CurrentEpoch  uint64
	MyEpoch       uint64
	// Fields holds every "key:value" line, including the ones above.
	Fields map[string]string
}

// OK reports cluster_state:ok.
func (c ClusterInfo) OK() bool { return c.State == "ok" }

// ParseClusterInfo parses the "key:value" lines of CLUSTER INFO. cluster_state is required;
// the numeric fields above must be integers when present.
func ParseClusterInfo(text string) (ClusterInfo, error) {
	info := ClusterInfo{Fields: parseKV(text)}
	var ok bool
	if info.State, ok = info.Fields["cluster_state"]; !ok {
		return info, parseErr("CLUSTER INFO lacks cluster_state")
	}
	if info.State != "ok" && info.State != "fail" {
		return info, parseErr("cluster_state %q", info.State)
	}
	ints := map[string]*int{
		"cluster_slots_assigned": &info.SlotsAssigned,
		"cluster_slots_ok":       &info.SlotsOK,
		"cluster_slots_pfail":    &info.SlotsPFail,
		"cluster_slots_fail":     &info.SlotsFail,
		"cluster_known_nodes":    &info.KnownNodes,
		"cluster_size":           &info.Size,
	}
	for k, p := range ints {
		if v, ok := info.Fields[k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return info, parseErr("CLUSTER INFO %s=%q", k, v)
			}
			*p = n
		}
	}
	uints := map[string]*uint64{"cluster_current_epoch": &info.CurrentEpoch, "cluster_my_epoch": &info.MyEpoch}
	for k, p := range uints {
		if v, ok := info.Fields[k]; ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return info, parseErr("CLUSTER INFO %s=%q", k, v)
			}
			*p = n
		}
	}
	return info, nil
}

// parseKV reads "key:value" lines, skipping blank lines and "# Section" headers.
func parseKV(text string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// ReplicationInfo holds the fields of INFO replication the engine uses.
type ReplicationInfo struct {
	Role         string // "master" or "slave"
	MasterLinkUp bool   // master_link_status:up (replicas)
	// MasterAddr is "master_host:master_port" (replicas): where replication
	// connects, which Redis 7.0 does not move when it learns a master's new
	// address by gossip.
	MasterAddr       string
	SyncInProgress   bool // master_sync_in_progress:1 (replicas)
	ConnectedReplica int  // connected_slaves (masters)
	// Offset is master_repl_offset on a master and slave_repl_offset on a replica.
	Offset int64
}

// ParseReplicationInfo parses INFO replication.
func ParseReplicationInfo(text string) (ReplicationInfo, error) {
	kv := parseKV(text)
	ri := ReplicationInfo{Role: kv["role"]}
	if ri.Role != "master" && ri.Role != "slave" {
		return ri, parseErr("INFO replication role %q", ri.Role)
	}
	ri.MasterLinkUp = kv["master_link_status"] == "up"
	if h, ok := kv["master_host"]; ok {
		ri.MasterAddr = net.JoinHostPort(h, kv["master_port"])
	}
	ri.SyncInProgress = kv["master_sync_in_progress"] == "1"
	if v, ok := kv["connected_slaves"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return ri, parseErr("connected_slaves %q", v)
		}
		ri.ConnectedReplica = n
	}
	off := "master_repl_offset"
	if ri.Role == "slave" {
		off = "slave_repl_offset"
	}
	if v, ok := kv[off]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return ri, parseErr("%s %q", off, v)
		}
		ri.Offset = n
	}
	return ri, nil
}

// ParseNodeInfo parses the reply of INFO replication keyspace server: the replication
// fields (ParseReplicationInfo), the number of keys (the keys= field of every dbN line of
// the keyspace section, the count DBSIZE gives; 0 without any such line) and run_id, which
// must be present (a new value means the process restarted).
func ParseNodeInfo(text string) (ReplicationInfo, int64, string, error) {
	ri, err := ParseReplicationInfo(text)
	if err != nil {
		return ri, 0, "", err
	}
	kv := parseKV(text)
	runID := kv["run_id"]
	if runID == "" {
		return ri, 0, "", parseErr("INFO server lacks run_id")
	}
	var keys int64
	for k, v := range kv {
		if !strings.HasPrefix(k, "db") || strings.TrimLeft(k[2:], "0123456789") != "" || len(k) == 2 {
			continue
		}
		field, _, _ := strings.Cut(v, ",")
		n, ok := strings.CutPrefix(field, "keys=")
		if !ok {
			return ri, 0, "", parseErr("INFO keyspace %s:%s", k, v)
		}
		c, err := strconv.ParseInt(n, 10, 64)
		if err != nil || c < 0 {
			return ri, 0, "", parseErr("INFO keyspace %s:%s", k, v)
		}
		keys += c
	}
	return ri, keys, runID, nil
}

// nodesShape is a CLUSTER NODES reply without what moves on every gossip round, each line's
// ping-sent and pong-recv fields, its lines sorted (the order is the node's hash table's):
// two replies with the same shape record the same nodes with the same addresses, flags,
// masters, config epochs, link states, slots and open slots.
func nodesShape(text string) string {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) > 5 {
			f = append(f[:4:4], f[6:]...)
		}
		lines = append(lines, strings.Join(f, " "))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
