package topology

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/controllers/acl"
)

// ACL users besides the default one (spec.users). Each operation runs on every endpoint
// concurrently, logs in as the default user with Options.Password, and is idempotent: a
// caller re-applies the whole desired state on every pass, which also gives a node that
// restarted from an older config (or none) the users it lacks. Passwords and their hashes
// are replaced by "***" in returned errors and never logged.

// ApplyUsers sets each user on every endpoint with ACL SETUSER <name> <acl.User.Args>: reset,
// on, the hash of each of its passwords, then its rules. The command applies all of them or
// none and leaves the user's connections open, so a change of rules or passwords takes
// effect in place. After a nil error each user logs in with any of its passwords on every
// endpoint, and with no other password.
//
// With Options.Pool, a node that already got exactly these arguments for every user, under
// the run_id the last observation saw and less than configMaxAge ago, is skipped without a
// connection: a healthy cluster's resync sends no ACL command. A restart (a new run_id)
// makes the node get them again at its next pass, and configMaxAge bounds how long an ACL
// change made by hand goes unseen.
func (e *Engine) ApplyUsers(ctx context.Context, eps []Endpoint, users []acl.User) error {
	if len(users) == 0 {
		return nil
	}
	var secrets []string
	digests := make(map[string]string, len(users))
	for _, u := range users {
		if u.Name == "default" || u.Name == "" {
			return fmt.Errorf("%w: ACL user %q is not one ApplyUsers may set", ErrInvalidDesired, u.Name)
		}
		for _, p := range u.Passwords {
			secrets = append(secrets, p, acl.Hash(p))
		}
		digests[u.Name] = acl.Hash(strings.Join(u.Args(), "\x00"))
	}
	c := e.newConns()
	now := time.Now()
	var stale []Endpoint
	for _, ep := range eps {
		if !c.memo(ep.Addr).usersApplied(digests, now) {
			stale = append(stale, ep)
		}
	}
	return e.onEveryNode(ctx, stale, candidates(e.opts.Password, "", nil), secrets, "Applying ACL users",
		func(ctx context.Context, ep Endpoint, cl *redis.Client) error {
			for _, u := range users {
				args := []any{"ACL", "SETUSER", u.Name}
				for _, a := range u.Args() {
					args = append(args, a)
				}
				if err := e.run(ctx, cl, args...); err != nil {
					return fmt.Errorf("ACL SETUSER %s: %w", u.Name, err)
				}
			}
			c.usersSet(ep.Addr, digests, now)
			return nil
		})
}

// DeleteUsers deletes the named users on every endpoint (ACL DELUSER, which also closes their
// connections; a user already gone is no error). After a nil error none of them can log in
// anywhere in eps.
func (e *Engine) DeleteUsers(ctx context.Context, eps []Endpoint, names []string) error {
	if len(names) == 0 {
		return nil
	}
	args := []any{"ACL", "DELUSER"}
	forget := make(map[string]string, len(names))
	for _, n := range names {
		if n == "default" {
			return fmt.Errorf("%w: the default user cannot be deleted", ErrInvalidDesired)
		}
		args = append(args, n)
		forget[n] = ""
	}
	c := e.newConns()
	for _, ep := range eps {
		c.usersSet(ep.Addr, forget, time.Time{})
	}
	return e.onEveryNode(ctx, eps, candidates(e.opts.Password, "", nil), nil, "Deleting ACL users",
		func(ctx context.Context, _ Endpoint, cl *redis.Client) error {
			return e.run(ctx, cl, args...)
		})
}
