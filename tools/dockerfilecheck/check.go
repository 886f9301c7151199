package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// maxShutdownTimeout is the longest SLUICE_SHUTDOWN_TIMEOUT the image may
// set: Docker's default stop grace is 10 s, and after the drain Sluice
// still stops its embedded Postgres (a checkpoint) before it exits.
const maxShutdownTimeout = 7 * time.Second

// finding is one problem, at a line of the Dockerfile (0: the file).
type finding struct {
	line int
	msg  string
}

func (f finding) String() string { return fmt.Sprintf("%d: %s", f.line, f.msg) }

// check returns every finding in the Dockerfile r; an error means it could
// not be parsed at all.
func check(r io.Reader) ([]finding, error) {
	res, err := parser.Parse(r)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil {
			line = w.Location.Start.Line
		}
		out = append(out, finding{line, w.Short})
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		out = append(out, finding{line, rule + ": " + msg})
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		return nil, err
	}
	if len(stages) == 0 {
		return append(out, finding{0, "no FROM: no stage to check"}), nil
	}
	return append(out, policy(stages[len(stages)-1])...), nil
}

// numericUser matches USER uid or uid:gid, numbers only: Kubernetes'
// runAsNonRoot can check only a numeric user.
var numericUser = regexp.MustCompile(`^([0-9]+)(:[0-9]+)?$`)

var (
	installPostgres = regexp.MustCompile(`apt-get install[^&;]*\bpostgresql-[0-9]+`)
	// LLVM's files are deleted by listing the package's files, which
	// leaves dpkg's records of it whole.
	removeLLVM = regexp.MustCompile(`dpkg-query -L[^&;|]*\blibllvm[0-9]+[^&]*\brm -f\b`)
	// Forcing dpkg past a dependency leaves it inconsistent: apt then
	// refuses every install until it is repaired.
	forceDepends = regexp.MustCompile(`--force-(depends|all|remove-essential)\b`)
)

// policy checks the runtime stage.
func policy(s instructions.Stage) []finding {
	var out []finding
	var user *instructions.UserCommand
	var entry *instructions.EntrypointCommand
	var health *instructions.HealthCheckCommand
	userLine, entryLine, healthLine := 0, 0, 0
	shutdown, shutdownLine := "", 0
	installsPostgres, removesLLVM, noCluster := 0, false, false
	for _, c := range s.Commands {
		line := 0
		if loc := c.Location(); len(loc) > 0 {
			line = loc[0].Start.Line
		}
		switch c := c.(type) {
		case *instructions.UserCommand:
			user, userLine = c, line
		case *instructions.EntrypointCommand:
			entry, entryLine = c, line
		case *instructions.HealthCheckCommand:
			health, healthLine = c, line
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				if kv.Key == "SLUICE_SHUTDOWN_TIMEOUT" {
					shutdown, shutdownLine = kv.Value, line
				}
			}
		case *instructions.RunCommand:
			script := strings.Join(c.CmdLine, " ")
			if installPostgres.MatchString(script) {
				installsPostgres = line
			}
			removesLLVM = removesLLVM || removeLLVM.MatchString(script)
			noCluster = noCluster || strings.Contains(script, "create_main_cluster = false")
			if forceDepends.MatchString(script) {
				out = append(out, finding{line, "dpkg --force-depends (or --force-all) leaves dpkg inconsistent, and apt-get install then fails in every image built FROM this one: delete the files instead (dpkg-query -L … | … rm -f)"})
			}
		}
	}
	switch {
	case user == nil:
		out = append(out, finding{0, "the runtime stage has no USER: the image would run as root"})
	case !numericUser.MatchString(user.User):
		out = append(out, finding{userLine, fmt.Sprintf("USER %s: give a numeric uid (uid:gid), which Kubernetes' runAsNonRoot can check", user.User)})
	case strings.SplitN(user.User, ":", 2)[0] == "0":
		out = append(out, finding{userLine, "USER 0 is root"})
	}
	if entry == nil || entry.PrependShell || len(entry.CmdLine) == 0 || !isInit(entry.CmdLine[0]) {
		out = append(out, finding{entryLine, "ENTRYPOINT must start an init (tini) in exec form: PID 1 must forward signals and reap orphans"})
	}
	if health == nil || health.Health == nil || len(health.Health.Test) == 0 || health.Health.Test[0] == "NONE" {
		out = append(out, finding{healthLine, "no HEALTHCHECK: docker ps could not tell a ready Sluice"})
	}
	if shutdown == "" {
		out = append(out, finding{0, fmt.Sprintf("ENV SLUICE_SHUTDOWN_TIMEOUT is not set: the default (10s) with Postgres' stop does not fit Docker's 10 s grace; set at most %v", maxShutdownTimeout)})
	} else if d, err := time.ParseDuration(shutdown); err != nil || d > maxShutdownTimeout {
		out = append(out, finding{shutdownLine, fmt.Sprintf("SLUICE_SHUTDOWN_TIMEOUT=%s: at most %v, so that the embedded Postgres stops cleanly within Docker's 10 s grace", shutdown, maxShutdownTimeout)})
	}
	if installsPostgres > 0 && !removesLLVM {
		out = append(out, finding{installsPostgres, "postgresql is installed with LLVM (libllvm, 107 MB, only for JIT, which Sluice turns off): delete its library files (dpkg-query -L libllvm14 … | … rm -f), leaving the package to dpkg"})
	}
	if installsPostgres > 0 && !noCluster {
		out = append(out, finding{installsPostgres, "postgresql-common creates an unused main cluster: write create_main_cluster = false to /etc/postgresql-common/createcluster.d first"})
	}
	return out
}

// isInit reports whether path is an init that reaps and forwards signals.
func isInit(path string) bool {
	base := path[strings.LastIndexByte(path, '/')+1:]
	return base == "tini" || base == "tini-static" || base == "dumb-init"
}
