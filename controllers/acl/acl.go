// Package acl knows the grammar of Redis ACL rules as spec.users uses them: it checks a
// user's rules (ParseRules), turns a user and its passwords into the arguments of ACL SETUSER
// (User.Args) and into redis.conf "user" lines (ConfLines), so that a node restarted from its
// config has the users before any client or the operator reaches it.
//
// The grammar is that of Redis 7.0 ("ACL rules" in the Redis ACL documentation,
// https://redis.io/docs/latest/operate/oss_and_stack/management/security/acl/, and
// ACLSetUser in Redis 7.0 acl.c). Passwords are the operator's: a rule that sets or clears one
// (>, <, #, !, nopass, resetpass) or resets the user (reset) is refused, as are selectors
// ((...), clearselectors), which a space-separated rules string cannot carry unambiguously.
// The package does no I/O.
package acl

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ReservedNames are the user names spec.users may not use: "default" is the operator's own
// user (its password is spec.auth), ExporterUser the redis_exporter sidecar's.
var ReservedNames = []string{"default", ExporterUser}

// Categories are the ACL categories of Redis 7.0 (ACL CAT on redis-server 7.0.15).
var Categories = []string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
	"hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
	"dangerous", "connection", "transaction", "scripting", "all",
}

// ErrInvalidRule is wrapped by every error of ParseRules.
var ErrInvalidRule = errors.New("invalid ACL rule")

// keywords are the rules without an argument that spec.users accepts.
var keywords = []string{
	"on", "off", "allkeys", "resetkeys", "allchannels", "resetchannels",
	"allcommands", "nocommands", "sanitize-payload", "skip-sanitize-payload",
}

// refused are keywords of the grammar that spec.users does not accept, with the reason.
var refused = map[string]string{
	"nopass":         "passwords are the operator's (passwordFrom)",
	"resetpass":      "passwords are the operator's (passwordFrom)",
	"reset":          "the operator resets the user itself before applying its rules",
	"clearselectors": "selectors are not supported in spec.users",
}

// commandsTxt lists the commands and subcommands ("config|get") of redis-server 7.0.15, one
// a line, as COMMAND LIST and COMMAND INFO give them; TestCommandsMatchServer checks it.
//
//go:embed commands.txt
var commandsTxt string

// commands is commandsTxt as a set.
var commands = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(commandsTxt, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			m[l] = true
		}
	}
	return m
}()

// ParseRules splits rules on white space and checks each rule; it returns them in order.
// Errors wrap ErrInvalidRule and name the offending rule. An empty rules string gives no
// rules (the user can then do nothing: a new user starts with no commands and no keys).
func ParseRules(rules string) ([]string, error) {
	out := strings.Fields(rules)
	for _, r := range out {
		if err := checkRule(r); err != nil {
			return nil, fmt.Errorf("%w %q: %s", ErrInvalidRule, r, err)
		}
	}
	return out, nil
}

func checkRule(r string) error {
	lower := strings.ToLower(r)
	if slices.Contains(keywords, lower) {
		return nil
	}
	if why, ok := refused[lower]; ok {
		return errors.New(why)
	}
	switch r[0] {
	case '>', '<', '#', '!':
		return errors.New("passwords are the operator's (passwordFrom)")
	case '(', ')':
		return errors.New("selectors are not supported in spec.users")
	case '~', '&':
		// A key or channel pattern; Redis accepts any, even empty.
		return nil
	case '%':
		// %R~, %W~, %RW~ (Redis 7.0 key permissions) and a pattern.
		perm, _, ok := strings.Cut(r[1:], "~")
		if !ok || perm == "" || strings.Trim(strings.ToUpper(perm), "RW") != "" {
			return errors.New(`a key permission is %R~, %W~ or %RW~ followed by a pattern`)
		}
		return nil
	case '+', '-':
		name := r[1:]
		if cat, ok := strings.CutPrefix(name, "@"); ok {
			if !slices.Contains(Categories, strings.ToLower(cat)) {
				return fmt.Errorf("unknown ACL category %q (Redis 7.0 has %s)", cat, strings.Join(Categories, ", "))
			}
			return nil
		}
		if !commands[strings.ToLower(name)] {
			return errors.New("not a command, command|subcommand or @category of Redis 7.0")
		}
		return nil
	}
	return errors.New("not an ACL rule (see the Redis ACL documentation, \"ACL rules\")")
}

// Hash is how Redis stores a password: the lowercase hex SHA-256 of its bytes (the form a
// "#<hash>" rule takes).
func Hash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

// User is one ACL user to apply: its name, its rules (from ParseRules) and every password it
// must accept, in plain text (only their hashes leave this package).
type User struct {
	Name      string
	Rules     []string
	Passwords []string
}

// Args are the arguments of ACL SETUSER after the name: reset (so rules removed from the spec
// go away), on, one #<hash> per distinct non-empty password, then the rules. ACL SETUSER
// applies them all or none (Redis 7.0 acl.c applies them to a copy of the user first), so a
// user changed in place is never seen half-changed, and its connections stay open.
func (u User) Args() []string {
	// resetchannels: reset grants every channel (&*) when acl-pubsub-default is
	// allchannels, which spec.config may set; a user's channels are its rules' alone.
	args := []string{"reset", "resetchannels", "on"}
	var seen []string
	for _, p := range u.Passwords {
		if p == "" || slices.Contains(seen, p) {
			continue
		}
		seen = append(seen, p)
		args = append(args, "#"+Hash(p))
	}
	return append(args, u.Rules...)
}

// ConfLines renders users as redis.conf "user" directives (Redis 7.0 loads them at start when
// no aclfile is set), each argument quoted with quote (resources.QuoteConfigValue), sorted by
// name. Only password hashes appear.
func ConfLines(users []User, quote func(string) string) string {
	sorted := slices.Clone(users)
	slices.SortFunc(sorted, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, u := range sorted {
		b.WriteString("user " + quote(u.Name))
		for _, a := range u.Args() {
			b.WriteString(" " + quote(a))
		}
		b.WriteString("\n")
	}
	return b.String()
}
