//go:build tools

// Package tools pins github.com/seaweedfs/seaweedfs for `go build github.com/seaweedfs/seaweedfs/weed`.
package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
