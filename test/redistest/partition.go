package redistest

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Cut drops every packet between the addresses of a and b, both ways, with iptables rules
// in the INPUT chain (loopback traffic passes it), as a network partition between two
// nodes: established connections stall and new ones time out. The nodes need
// Options.OwnAddress, and the test needs root. The returned function heals the cut; the
// rules are also removed by a t.Cleanup. Test clients on 127.0.0.1 are not affected.
func Cut(t testing.TB, a, b *Node) (heal func()) {
	t.Helper()
	if a.IP() == "127.0.0.1" || b.IP() == "127.0.0.1" {
		t.Fatal("redistest: Cut needs nodes started with Options.OwnAddress")
	}
	rules := [][]string{
		{"INPUT", "-s", a.IP(), "-d", b.IP(), "-j", "DROP"},
		{"INPUT", "-s", b.IP(), "-d", a.IP(), "-j", "DROP"},
	}
	for _, r := range rules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, r...)...).CombinedOutput(); err != nil {
			t.Fatalf("redistest: iptables -I %s: %v: %s", strings.Join(r, " "), err, out)
		}
	}
	var once sync.Once
	heal = func() {
		once.Do(func() {
			for _, r := range rules {
				if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).CombinedOutput(); err != nil {
					t.Errorf("redistest: iptables -D %s: %v: %s", strings.Join(r, " "), err, out)
				}
			}
		})
	}
	t.Cleanup(heal)
	return heal
}
