// Command dockerfilecheck checks a Dockerfile without a container engine:
// BuildKit's own parser and lint rules (the checks `docker build --check`
// runs), then what Sluice's image must hold for operators (see
// docs/operations.md): a non-root numeric user, an init as PID 1, a
// health check, a shutdown drain that fits Docker's 10 s stop grace, and
// a Postgres install without LLVM and without a cluster of its own.
//
// Usage: go run . path/to/Dockerfile (make lint-docker). It prints each
// finding with its line and exits 1 when there is one.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dockerfilecheck Dockerfile")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dockerfilecheck:", err)
		os.Exit(2)
	}
	defer f.Close()
	findings, err := check(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dockerfilecheck: %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	for _, m := range findings {
		fmt.Printf("%s:%s\n", os.Args[1], m)
	}
	if len(findings) > 0 {
		os.Exit(1)
	}
}
