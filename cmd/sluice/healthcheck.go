package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// healthcheck asks the daemon listening on listen (the listen setting,
// host:port) whether it is ready: GET /readyz must answer 200 within
// timeout, over TLS when useTLS (tls_cert_file is set). It returns nil
// when it does and an error saying what was found otherwise. The Docker
// image's HEALTHCHECK runs it, so it needs no curl.
func healthcheck(ctx context.Context, listen string, useTLS bool, timeout time.Duration) error {
	url, err := readyURL(listen)
	if err != nil {
		return err
	}
	transport := &http.Transport{Proxy: nil}
	if useTLS {
		url = "https" + strings.TrimPrefix(url, "http")
		// The check runs beside the daemon, on its loopback address, which
		// the certificate does not name, and sends no credential: it only
		// asks whether the daemon is ready, so whom it reaches needs no
		// proof.
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// A client of its own: no proxy from the environment may stand between
	// the check and the daemon it runs beside.
	client := &http.Client{Transport: transport}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512)) // only for the message
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// readyURL returns the /readyz URL of the daemon listening on listen. A
// listener on every address (":6363", "0.0.0.0:6363", "[::]:6363") is
// reached on the loopback address of its family.
func readyURL(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("healthcheck: listen address %q: %w", listen, err)
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("healthcheck: listen address %q has no fixed port to check", listen)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
