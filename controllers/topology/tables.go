package topology

import (
	"net"
	"strconv"
)

// hasOpenSlots reports whether n's own record has a slot in MIGRATING or IMPORTING state.
func hasOpenSlots(n *NodeView) bool {
	s := n.Self()
	return s != nil && (len(s.Migrating) > 0 || len(s.Importing) > 0)
}

// sameAddr compares a table record's address with an endpoint address (IP forms normalised).
func sameAddr(r NodeRecord, addr string) bool {
	if r.Flags.NoAddr || r.IP == "" {
		return false
	}
	return addrEqual(net.JoinHostPort(r.IP, strconv.Itoa(r.Port)), addr)
}

// addrEqual compares two "ip:port" addresses, IP forms normalised.
func addrEqual(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	x, y := net.ParseIP(ha), net.ParseIP(hb)
	return x != nil && y != nil && x.Equal(y)
}

// knows reports whether node n's table has target's ID at target's endpoint address, past
// the handshake.
func knows(n, target *NodeView) bool {
	r := n.Lookup(target.ID)
	return r != nil && !r.Flags.Handshake && sameAddr(*r, target.Endpoint.Addr)
}

// handshaking reports whether n has a handshake in progress with addr.
func handshaking(n *NodeView, addr string) bool {
	for _, r := range n.Known {
		if r.Flags.Handshake && sameAddr(r, addr) {
			return true
		}
	}
	return false
}
