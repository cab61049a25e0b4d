// Command edgemq is the EdgeMQ binary: broker, admin and client verbs in one executable.
//
// This first version knows only `version` and `help`; serve, topic, send, consume, offset,
// group, stats, bench and demo come with the broker.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// version is set at link time with -ldflags "-X main.version=…" (see the Makefile).
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the process exit code:
// 0 on success, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "edgemq %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "edgemq: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: edgemq <command> [arguments]

Commands:
  version   print the version, Go version and platform
  help      print this help
`)
}
