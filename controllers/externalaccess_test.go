package controllers

import (
	"errors"
	"testing"

	"github.com/redis-operator/redis-operator/controllers/topology"
)

// addressesPending names a node that does not know another's announced
// address, as its CLUSTER NODES shows it; failed, handshaking and unknown
// nodes, and nodes that do not answer, are not judged.
func TestAddressesPending(t *testing.T) {
	addrs := map[string]string{"c-0": "10.96.0.1", "c-1": "10.96.0.2", "c-2": "10.96.0.3"}
	view := func() *topology.ClusterView {
		v := &topology.ClusterView{}
		for i, pod := range []string{"c-0", "c-1", "c-2"} {
			n := &topology.NodeView{Endpoint: topology.Endpoint{Name: pod}, ID: ids(string(rune('a' + i)))}
			for j, other := range []string{"c-0", "c-1", "c-2"} {
				k := topology.NodeRecord{ID: ids(string(rune('a' + j))), Hostname: addrs[other]}
				k.Flags.Myself = i == j
				n.Known = append(n.Known, k)
			}
			v.Nodes = append(v.Nodes, n)
		}
		return v
	}
	if got := addressesPending(view(), addrs); got != "" {
		t.Errorf("every node knows every address: %q", got)
	}

	v := view()
	v.Nodes[1].Known[2].Hostname = ""
	if got, want := addressesPending(v, addrs), "pod c-1 does not know pod c-2's address 10.96.0.3 yet"; got != want {
		t.Errorf("c-1 lacks c-2's address: %q, want %q", got, want)
	}
	v.Nodes[1].Known[2].Flags.Handshake = true
	if got := addressesPending(v, addrs); got != "" {
		t.Errorf("a node in handshake is judged: %q", got)
	}

	v = view()
	v.Nodes[0].Known[0].Hostname = "10.96.9.9" // c-0 announces an old address
	if got, want := addressesPending(v, addrs), "pod c-0 does not know pod c-0's address 10.96.0.1 yet"; got != want {
		t.Errorf("c-0 announces another address: %q, want %q", got, want)
	}

	v = view()
	v.Nodes[2].Err = errors.New("connection refused")
	v.Nodes[2].Known = nil
	v.Nodes[0].Known = append(v.Nodes[0].Known, topology.NodeRecord{ID: ids("z")}) // not of this cluster's pods
	if got := addressesPending(v, addrs); got != "" {
		t.Errorf("a node that does not answer, or one of no pod, is judged: %q", got)
	}
}
