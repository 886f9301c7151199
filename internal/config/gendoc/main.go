// Command gendoc writes docs/configuration.md from internal/config's table
// of options (`make generate`), or with -check fails when the file differs
// from it (`make verify`).
//
//	go run ./internal/config/gendoc [-check] docs/configuration.md
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/internal/config"
)

func main() {
	check := flag.Bool("check", false, "fail when the file differs from what would be written, instead of writing it")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gendoc [-check] docs/configuration.md")
		os.Exit(2)
	}
	path, want := flag.Arg(0), []byte(config.Reference())
	if *check {
		got, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if !bytes.Equal(got, want) {
			fmt.Fprintf(os.Stderr, "%s is out of date with internal/config/options.go: run make generate\n", path)
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(path, want, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
