// Package apiwarnings collects the warning headers an API server returns
// (deprecated APIs, Pod Security warnings, unknown fields, admission
// webhooks' warnings), for tests that set a Collector as a client's
// rest.Config.WarningHandlerWithContext.
package apiwarnings

import (
	"context"
	"sync"
)

// Collector keeps every warning text it is handed, in order. Safe for
// concurrent use; the zero value is empty.
type Collector struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeaderWithContext records text (rest.WarningHandlerWithContext).
func (c *Collector) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, text)
}

// Take returns the warnings collected since the last Take and forgets them.
func (c *Collector) Take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.list
	c.list = nil
	return out
}
