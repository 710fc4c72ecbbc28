// Command benchtable prints the table of benchmark results collected in a rows file (see
// package test/benchtable): `go run ./hack/benchtable bin/bench.jsonl`. A missing file
// prints that no benchmark recorded a row.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/redis-operator/redis-operator/test/benchtable"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtable ROWS.jsonl")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Println("benchtable: no benchmark recorded a row")
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer func() { _ = f.Close() }()
	rows, err := benchtable.Read(f)
	if err == nil {
		err = benchtable.Render(os.Stdout, rows)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
