package topology

import "testing"

// TestMask: secrets never reach an error message, whether passed as such
// (password operations) or as values of secret-looking config keys
// (ApplyConfig); other values and an empty secret leave the message alone.
func TestMask(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msg     string
		secrets []string
		want    string
	}{
		{name: "no secrets", msg: "ERR syntax error", want: "ERR syntax error"},
		{name: "every occurrence", msg: "ERR Error in ACL SETUSER modifier '>pw1': pw1 again", secrets: []string{"pw1"},
			want: "ERR Error in ACL SETUSER modifier '>***': *** again"},
		{name: "several secrets", msg: "old pw-a new pw-b", secrets: []string{"pw-a", "pw-b"}, want: "old *** new ***"},
		{name: "an empty secret masks nothing", msg: "ERR x", secrets: []string{""}, want: "ERR x"},
		{
			name:    "config: secret-looking keys only, any case",
			msg:     "ERR CONFIG SET failed for masterauth s3cret, MasterUser bob, hz 20",
			secrets: configSecrets(map[string]string{"masterauth": "s3cret", "MasterUser": "bob", "hz": "20", "requirePASS": ""}),
			want:    "ERR CONFIG SET failed for masterauth ***, MasterUser ***, hz 20",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mask(tc.msg, tc.secrets); got != tc.want {
				t.Errorf("mask = %q, want %q", got, tc.want)
			}
		})
	}
}
