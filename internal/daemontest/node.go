package daemontest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The client tests run real clients on Node, each from a project of its
// own under test/ (pinned npm packages, installed by `npm ci`, which the
// make targets and .ci/run do). They run only when their make target sets
// its environment variable; `make test` runs every such target.

// NodeProject returns the directory of the Node project test/<name>. It
// skips t unless the environment variable gate is "1", and fails it when
// the npm package pkg is not installed there.
func NodeProject(t *testing.T, gate, name, pkg string) string {
	t.Helper()
	if os.Getenv(gate) != "1" {
		t.Skipf("set %s=1 (its make target does) to run the Node clients of test/%s", gate, name)
	}
	dir := filepath.Join(repoRoot(t), "test", name)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		t.Fatalf("%s is not installed: run npm ci in %s (%v)", pkg, dir, err)
	}
	return dir
}

// RunNode runs `node args…` in dir with env added to this process's, logs
// its output, and fails t when it fails.
func RunNode(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node %v:\n%s", args, out)
	if err != nil {
		t.Fatalf("node %v failed: %v", args, err)
	}
}

// repoRoot returns the repository's root: the nearest directory above the
// test's (tests run in their package's directory) holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
