package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Password operations for a rotation without downtime. A Redis 7 ACL user can hold several
// passwords at once ("ACL SETUSER ... >pass" adds one, "<pass" removes one; Redis ACL
// documentation, "ACL rules"), while CONFIG SET requirepass replaces them all: it is
// "ACL SETUSER default resetpass >pass" (Redis 7.0 config.c, updateRequirePass). masterauth is
// what a replica sends to its master when it (re)connects; changing it does not drop a live
// replication link (Redis replication documentation, "Authentication").
//
// Each operation runs on every endpoint concurrently and is idempotent, so a caller that
// crashed half-way simply calls it again. Because nodes may hold different passwords while a
// rotation is interrupted (a node restarted from a config with only the old or only the new
// one), each operation logs in with the first password a node accepts among Options.Password,
// the operation's own password and the extra login candidates. A node without a password (its
// default user is "nopass") accepts any of them: the client logs in with HELLO ... AUTH default
// <password>, which a nopass user accepts whatever the password (Redis 7.0 acl.c,
// ACLCheckUserCredentials; only the one-argument AUTH <password> is refused there, with "AUTH
// <password> called without any password configured"), so turning authentication on needs no
// login without AUTH, and none is ever tried. Passwords are never logged and
// are replaced by "***" in returned errors. An error names every failing endpoint; one that
// accepted none of the passwords wraps ErrAuth.

// AddPassword adds password to the default user of every endpoint (ACL SETUSER default
// >password), keeping the passwords it already has, and then checks on a fresh connection
// that each node accepts it (AUTH password, PING). After a nil error a client may use
// password on any endpoint.
//
// On a node without a password the added password becomes its only one: ">password" clears
// nopass (Redis ACL documentation, "ACL rules"), so from then on clients that send no password
// are refused with NOAUTH. That is what turning authentication on means; no rule accepts both.
func (e *Engine) AddPassword(ctx context.Context, eps []Endpoint, password string, login ...string) error {
	if password == "" {
		return fmt.Errorf("%w: empty password", ErrInvalidDesired)
	}
	secrets := append([]string{password}, login...)
	return e.onEveryNode(ctx, eps, candidates(e.opts.Password, password, login), secrets, "Adding a password to the default user",
		func(ctx context.Context, ep Endpoint, cl *redis.Client) error {
			if err := e.run(ctx, cl, "ACL", "SETUSER", "default", "on", ">"+password); err != nil {
				return err
			}
			check, err := e.login(ctx, ep.Addr, []string{password})
			if err != nil {
				return fmt.Errorf("the added password is not accepted: %w", err)
			}
			return check.Close()
		})
}

// SetMasterAuth sets masterauth (the password a replica gives its master) to password on every
// endpoint (CONFIG SET masterauth). Like every password operation it writes nothing to disk:
// a restarted node takes its passwords from the Secret's auth.conf.
func (e *Engine) SetMasterAuth(ctx context.Context, eps []Endpoint, password string, login ...string) error {
	secrets := append([]string{password}, login...)
	return e.onEveryNode(ctx, eps, candidates(e.opts.Password, password, login), secrets, "Setting masterauth",
		func(ctx context.Context, _ Endpoint, cl *redis.Client) error {
			return e.run(ctx, cl, "CONFIG", "SET", "masterauth", password)
		})
}

// RemoveOtherPasswords leaves keep as the only password of the default user on every endpoint
// (CONFIG SET requirepass keep, which removes every other password at once, including one
// left over by an interrupted earlier rotation). Nothing is written to disk (no CONFIG
// REWRITE, which would put the password in plain text into the config file on the data
// volume). Clients still using another password are refused from then on.
func (e *Engine) RemoveOtherPasswords(ctx context.Context, eps []Endpoint, keep string, login ...string) error {
	if keep == "" {
		return fmt.Errorf("%w: empty password", ErrInvalidDesired)
	}
	secrets := append([]string{keep}, login...)
	return e.onEveryNode(ctx, eps, candidates(keep, e.opts.Password, login), secrets, "Removing the other passwords of the default user",
		func(ctx context.Context, _ Endpoint, cl *redis.Client) error {
			return e.run(ctx, cl, "CONFIG", "SET", "requirepass", keep)
		})
}

// candidates lists the distinct non-empty passwords to try, in order; an empty list means
// connecting without AUTH.
func candidates(first, second string, more []string) []string {
	var out []string
	for _, p := range append([]string{first, second}, more...) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// onEveryNode logs in to every endpoint with the first accepted password and runs fn there,
// concurrently. secrets are masked in the returned errors.
func (e *Engine) onEveryNode(ctx context.Context, eps []Endpoint, login, secrets []string, what string,
	fn func(ctx context.Context, ep Endpoint, cl *redis.Client) error) error {
	for _, ep := range eps {
		if err := validateAddr(ep.Addr); err != nil {
			return fmt.Errorf("%w: endpoint %s: %w", ErrInvalidDesired, ep.Name, err)
		}
	}
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.log.Info(what, "node", ep.Name)
			cl, err := e.login(ctx, ep.Addr, login)
			if err == nil {
				err = fn(ctx, ep, cl)
				_ = cl.Close()
			}
			if err != nil {
				wrapped := fmt.Errorf("%s: %s", ep.Name, mask(err.Error(), secrets))
				if errors.Is(err, ErrAuth) {
					wrapped = fmt.Errorf("%w: %w", ErrAuth, wrapped)
				}
				errs[i] = wrapped
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// login connects to addr and returns a client authenticated with the first of passwords the
// node accepts (checked with PING); without passwords it connects without AUTH. It wraps
// ErrAuth when the node refused them all.
func (e *Engine) login(ctx context.Context, addr string, passwords []string) (*redis.Client, error) {
	if len(passwords) == 0 {
		passwords = []string{""}
	}
	var last error
	for _, p := range passwords {
		cl := newClient(e.opts, addr, p, 1)
		err := e.run(ctx, cl, "PING")
		if err == nil {
			return cl, nil
		}
		_ = cl.Close()
		if !errors.Is(err, ErrAuth) {
			return nil, err
		}
		last = err
	}
	return nil, fmt.Errorf("no password was accepted: %w", last)
}

// run sends one command bounded by CommandTimeout, with authentication failures wrapped in
// ErrAuth.
func (e *Engine) run(ctx context.Context, cl *redis.Client, args ...any) error {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	return classify(cl.Do(cctx, args...).Err())
}
