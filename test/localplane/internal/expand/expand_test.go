package expand

import "testing"

func TestString(t *testing.T) {
	m := MapOf(map[string]string{"POD_IP": "127.64.0.2", "EMPTY": "", "A": "$(B)"})
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"--ip $(POD_IP)", "--ip 127.64.0.2"},
		{"$(POD_IP):6379", "127.64.0.2:6379"},
		{"$(MISSING)", "$(MISSING)"},
		{"x$(EMPTY)y", "xy"},
		{"$$(POD_IP)", "$(POD_IP)"},
		{"$$", "$"},
		{"cost $5", "cost $5"},
		{"trailing $", "trailing $"},
		{"open $(POD_IP", "open $(POD_IP"},
		{"$()", "$()"},
		{"$(A)", "$(B)"}, // values are not expanded twice
		{"$(POD_IP)$(POD_IP)", "127.64.0.2127.64.0.2"},
	}
	for _, c := range cases {
		if got := String(c.in, m); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
