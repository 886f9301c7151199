package main

import (
	"crypto/tls"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestTLSProcess: `sluice serve` with a certificate serves HTTPS, `sluice
// healthcheck` with the same configuration checks it over TLS, and SIGHUP
// makes it serve a renewed certificate.
func TestTLSProcess(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	first := dt.WriteCertificate(t, dir, 1)
	tlsEnv := []string{"SLUICE_TLS_CERT_FILE=" + first.CertFile, "SLUICE_TLS_KEY_FILE=" + first.KeyFile}
	p, logs := startLogged(t, filepath.Join(dir, "data"), tlsEnv...)

	// Ready once the change feed has read the log, soon after serving.
	eventually.True(t, time.Minute, "healthcheck over TLS passes", func() bool {
		_, err := exec.Command(binary, "healthcheck", "--listen", p.Addr, "--tls-cert-file", first.CertFile, "--tls-key-file", first.KeyFile).CombinedOutput()
		return err == nil
	})
	if out, err := exec.Command(binary, "healthcheck", "--listen", p.Addr).CombinedOutput(); err == nil {
		t.Fatalf("healthcheck over plain HTTP of a TLS listener passed: %s", out)
	}

	serial := func(c dt.Certificate) int64 {
		t.Helper()
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.Pool}}}
		resp, err := client.Get("https://" + p.Addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(first); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	second := dt.WriteCertificate(t, dir, 2) // the same files, renewed
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "reloaded the TLS certificate")
	if got := serial(second); got != 2 {
		t.Fatalf("serial %d after SIGHUP, want 2", got)
	}
}
