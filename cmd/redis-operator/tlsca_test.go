package main

import (
	"strings"
	"testing"
	"time"
)

// TestTLSCAValidityFloor: a --tls-ca-validity shorter than
// tlscerts.MinCAValidity stops the operator before it starts, naming the
// flag and the floor (a CA that short would be due for renewal as soon as
// it is made).
func TestTLSCAValidityFloor(t *testing.T) {
	exited, logs := runOperator(t, "", "--tls-ca-validity=5m", "--webhooks=false", "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("the operator started with --tls-ca-validity=5m")
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the operator did not stop; logs:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "--tls-ca-validity 5m0s is shorter than 10m0s") {
		t.Errorf("logs do not name the flag and its floor:\n%s", logs)
	}
}
