package webhooks

import (
	"slices"
	"testing"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestControllerRefusesWhatTheWebhookRefuses: the parameters the grammar
// refuses or locks off are exactly resources.RefusedConfigKeys and
// LockedOffConfigKeys, which the controller refuses too when a spec
// reached it without the webhook.
func TestControllerRefusesWhatTheWebhookRefuses(t *testing.T) {
	for name, prm := range redisParams {
		switch {
		case prm.kind == kindRefused && !slices.Contains(resources.RefusedConfigKeys, name):
			t.Errorf("%s is refused by the webhook but not in resources.RefusedConfigKeys", name)
		case prm.kind == kindLockedOff && !slices.Contains(resources.LockedOffConfigKeys, name):
			t.Errorf("%s is locked off by the webhook but not in resources.LockedOffConfigKeys", name)
		}
	}
	for _, name := range resources.RefusedConfigKeys {
		if redisParams[name].kind != kindRefused {
			t.Errorf("resources.RefusedConfigKeys has %s, which the webhook does not refuse", name)
		}
	}
	for _, name := range resources.LockedOffConfigKeys {
		if redisParams[name].kind != kindLockedOff {
			t.Errorf("resources.LockedOffConfigKeys has %s, which the webhook does not lock off", name)
		}
	}
}

// TestRenameCommandReadAsRedisDoes: rename-command's command is the word
// redis-server reads, quoted or not.
func TestRenameCommandReadAsRedisDoes(t *testing.T) {
	for value, refused := range map[string]bool{
		`acl ""`:                 true,
		`"acl" ""`:               true,
		`'config' ""`:            true,
		`"clu\ster" x`:           true, // \s is s inside double quotes
		`"\x61cl" x`:             true, // \x61 is a
		`FLUSHALL ""`:            false,
		`"FLUSHALL" "not-flush"`: false,
		`"acl`:                   true, // unclosed: refused as malformed
		`"acl"x ""`:              true, // no space after the quote
		`KEYS 'keys-is-renamed'`: false,
	} {
		if got := checkRenameCommand(value) != ""; got != refused {
			t.Errorf("rename-command %s: refused %v, want %v (%s)", value, got, refused, checkRenameCommand(value))
		}
	}
}
