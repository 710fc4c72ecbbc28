//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// sideBySide makes t, a top-level test, one of the side-by-side group
// (doc.go): it calls t.Parallel, and when E2E_AFTER names a file, the
// group's first test holds every test of the group until that file exists
// (at most afterWait). make test runs the main module's unit tests beside
// this suite (hack/unit-beside-e2e.sh): they overlap the one-at-a-time
// tests, which mostly wait and leave the two cores idle, and end before
// the group, which keeps both busy and whose scenarios time failovers.
func sideBySide(t *testing.T) {
	t.Helper()
	t.Parallel()
	afterOnce.Do(waitAfter)
}

// afterWait bounds the wait for E2E_AFTER: past it the group starts anyway,
// with a line saying so.
const afterWait = 30 * time.Minute

var afterOnce sync.Once

func waitAfter() {
	path := os.Getenv("E2E_AFTER")
	if path == "" {
		return
	}
	start := time.Now()
	for {
		if _, err := os.Stat(path); err == nil {
			fmt.Printf("e2e: the side-by-side group started after %s, %.0fs after the one-at-a-time tests ended\n", path, time.Since(start).Seconds())
			return
		}
		if time.Since(start) > afterWait {
			fmt.Printf("e2e: the side-by-side group starts without %s after %s\n", path, afterWait)
			return
		}
		time.Sleep(time.Second)
	}
}
