package acl

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

func quote(s string) string { return `"` + s + `"` }

// userAccepts PINGs addr as user with password and returns the reply's error.
func userAccepts(addr, user, password string) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx).Err()
}

// The embedded command list is exactly what the real server knows, so ParseRules refuses
// the same command names Redis does.
func TestCommandsMatchServer(t *testing.T) {
	n := redistest.StartOne(t, redistest.Options{})
	want := map[string]bool{}
	for _, c := range n.Do("COMMAND", "LIST").([]any) {
		want[c.(string)] = true
	}
	infos := n.Do("COMMAND", "INFO").([]any)
	for _, info := range infos {
		fields := info.([]any)
		// Reply of COMMAND INFO (Redis 7.0): name, arity, flags, first, last, step,
		// acl categories, tips, key specs, subcommands.
		if len(fields) < 10 {
			continue
		}
		for _, sub := range fields[9].([]any) {
			want[sub.([]any)[0].(string)] = true
		}
	}
	if len(want) != len(commands) {
		t.Errorf("the server has %d commands and subcommands, commands.txt %d", len(want), len(commands))
	}
	for c := range want {
		if !commands[c] {
			t.Errorf("commands.txt lacks %q", c)
		}
	}
}

// Every rule ParseRules accepts, the real server accepts too; every rule it refuses for its
// grammar, the server refuses as well; rules refused by policy (passwords, reset, selectors)
// are named with the reason.
func TestParseRulesAgreesWithRedis(t *testing.T) {
	n := redistest.StartOne(t, redistest.Options{})
	cl := n.Client()
	ctx := context.Background()
	valid := []string{
		"~app:* +@read +@write", "on", "off", "allkeys", "resetkeys", "%R~ro:* %W~wo:* %RW~rw:*",
		"&chan:* allchannels resetchannels", "allcommands", "nocommands", "+@all -@dangerous",
		"+GET +config|get -config|set", "sanitize-payload skip-sanitize-payload", "~", "",
		"+@READ -@Admin +client|setname",
	}
	for _, rules := range valid {
		args, err := ParseRules(rules)
		if err != nil {
			t.Errorf("ParseRules(%q): %v", rules, err)
			continue
		}
		cmd := append([]any{"ACL", "SETUSER", "probe", "reset"}, anys(args)...)
		if err := cl.Do(ctx, cmd...).Err(); err != nil {
			t.Errorf("%q accepted by ParseRules, refused by Redis: %v", rules, err)
		}
	}
	grammar := []string{"+@foo", "+nosuch", "+get|x|y", "%X~a", "%~a", "bogus", "-@nosuch"}
	for _, rule := range grammar {
		_, err := ParseRules("~a:* " + rule)
		if !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), rule) {
			t.Errorf("ParseRules(%q) = %v, want ErrInvalidRule naming it", rule, err)
		}
		if err := cl.Do(ctx, "ACL", "SETUSER", "probe", "reset", rule).Err(); err == nil {
			t.Errorf("%q refused by ParseRules, accepted by Redis", rule)
		}
	}
	policy := map[string]string{
		">secret": "passwords", "<secret": "passwords", "#" + Hash("x"): "passwords", "!" + Hash("x"): "passwords",
		"nopass": "passwords", "resetpass": "passwords", "reset": "resets", "(~x +get)": "selectors",
		"clearselectors": "selectors",
	}
	for rule, why := range policy {
		_, err := ParseRules("+@read " + rule)
		if !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseRules(%q) = %v, want ErrInvalidRule saying %q", rule, err, why)
		}
	}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Args hash each distinct password and put reset, resetchannels (reset
// alone grants every channel under acl-pubsub-default allchannels) and on
// first.
func TestArgs(t *testing.T) {
	u := User{Name: "app", Rules: []string{"~app:*", "+@read"}, Passwords: []string{"a", "", "b", "a"}}
	want := []string{"reset", "resetchannels", "on", "#" + Hash("a"), "#" + Hash("b"), "~app:*", "+@read"}
	if got := u.Args(); !slices.Equal(got, want) {
		t.Fatalf("Args() = %q, want %q", got, want)
	}
	if Hash("a") != "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb" {
		t.Fatal("Hash is not hex SHA-256")
	}
}

// A node started from ConfLines has the users with their rules and passwords, and no file of
// its directory holds a plain-text password.
func TestConfLinesLoadAtStart(t *testing.T) {
	const pwA, pwA2, pwB = "app pass \"1\"", "app-second", "reader-pass"
	users := []User{
		{Name: "reader", Rules: []string{"~ro:*", "+@read", "+ping"}, Passwords: []string{pwB}},
		{Name: "app", Rules: []string{"~app:*", "+@read", "+@write", "+ping"}, Passwords: []string{pwA, pwA2}},
	}
	conf := ConfLines(users, quote)
	if strings.Contains(conf, pwA) || strings.Contains(conf, pwB) {
		t.Fatal("ConfLines holds a plain-text password")
	}
	if !strings.HasPrefix(conf, `user "app"`) {
		t.Fatalf("ConfLines not sorted by name:\n%s", conf)
	}
	n := redistest.StartOne(t, redistest.Options{Extra: strings.Split(strings.TrimSpace(conf), "\n")})
	for _, pw := range []string{pwA, pwA2} {
		if err := userAccepts(n.Addr(), "app", pw); err != nil {
			t.Fatalf("app with a configured password: %v", err)
		}
	}
	if err := userAccepts(n.Addr(), "reader", pwB); err != nil {
		t.Fatal(err)
	}
	if err := userAccepts(n.Addr(), "app", pwB); err == nil {
		t.Fatal("app accepted another user's password")
	}
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), Username: "reader", Password: pwB, Protocol: 2, DisableIdentity: true})
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Set(ctx, "ro:1", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("reader wrote: %v", err)
	}
	if err := cl.Get(ctx, "app:1").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("reader read outside its keys: %v", err)
	}
	n.Stop()
	for _, pw := range []string{pwA, pwA2, pwB} {
		if files := n.FilesHolding(pw); len(files) > 0 {
			t.Fatalf("plain-text password in %v", files)
		}
	}
}
