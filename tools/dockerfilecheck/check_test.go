package main

import (
	"os"
	"strings"
	"testing"
)

// TestRepositoryDockerfile: the image Sluice ships passes every check.
func TestRepositoryDockerfile(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	findings, err := check(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range findings {
		t.Errorf("Dockerfile:%s", m)
	}
}

// good is a runtime stage that passes; each case below breaks one thing.
const good = `FROM debian:bookworm-slim
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/sluice.conf \
 && apt-get install -y postgresql-15 tini \
 && dpkg-query -L libllvm14 libz3-4 | grep '^/usr/lib/' | while read -r f; do rm -f "$f"; done
ENV SLUICE_SHUTDOWN_TIMEOUT=6s
USER 10001:10001
HEALTHCHECK CMD ["/usr/local/bin/sluice", "healthcheck"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sluice"]
`

func TestCheck(t *testing.T) {
	cases := []struct {
		name, dockerfile, want string // want: "" passes, else part of a finding
	}{
		{"good", good, ""},
		{"named user", strings.Replace(good, "USER 10001:10001", "USER sluice", 1), "7: USER sluice: give a numeric uid"},
		{"root", strings.Replace(good, "USER 10001:10001", "USER 0", 1), "USER 0 is root"},
		{"no user", strings.Replace(good, "USER 10001:10001\n", "", 1), "no USER"},
		{"no init", strings.Replace(good, `"/usr/bin/tini", "--", `, "", 1), "ENTRYPOINT must start an init"},
		{"shell entrypoint", strings.Replace(good, `ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sluice"]`, "ENTRYPOINT /usr/bin/tini -- sluice", 1), "ENTRYPOINT must start an init"},
		{"no health check", strings.Replace(good, `HEALTHCHECK CMD ["/usr/local/bin/sluice", "healthcheck"]`+"\n", "", 1), "no HEALTHCHECK"},
		{"health check none", strings.Replace(good, `HEALTHCHECK CMD ["/usr/local/bin/sluice", "healthcheck"]`, "HEALTHCHECK NONE", 1), "no HEALTHCHECK"},
		{"long drain", strings.Replace(good, "=6s", "=10s", 1), "6: SLUICE_SHUTDOWN_TIMEOUT=10s: at most 7s"},
		{"default drain", strings.Replace(good, "ENV SLUICE_SHUTDOWN_TIMEOUT=6s\n", "", 1), "ENV SLUICE_SHUTDOWN_TIMEOUT is not set"},
		{"LLVM kept", strings.Replace(good, " \\\n && dpkg-query -L libllvm14 libz3-4 | grep '^/usr/lib/' | while read -r f; do rm -f \"$f\"; done", "", 1), "2: postgresql is installed with LLVM"},
		{"LLVM purged past dpkg", strings.Replace(good, "dpkg-query -L libllvm14 libz3-4 | grep '^/usr/lib/' | while read -r f; do rm -f \"$f\"; done", "dpkg --purge --force-depends libllvm14 libz3-4", 1), "2: dpkg --force-depends (or --force-all) leaves dpkg inconsistent"},
		{"main cluster", strings.Replace(good, "create_main_cluster = false", "create_main_cluster = true", 1), "unused main cluster"},
		{"BuildKit rule", strings.Replace(good, "FROM debian:bookworm-slim", "FROM debian:bookworm-slim as Runtime", 1), "FromAsCasing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			findings, err := check(strings.NewReader(c.dockerfile))
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, f := range findings {
				all = append(all, f.String())
			}
			got := strings.Join(all, "\n")
			if c.want == "" {
				if got != "" {
					t.Fatalf("findings in a good Dockerfile:\n%s", got)
				}
				return
			}
			if !strings.Contains(got, c.want) {
				t.Fatalf("findings:\n%s\nwant one with %q", got, c.want)
			}
		})
	}
}
