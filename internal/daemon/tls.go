package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/httpstream"
)

// certificate is the TLS certificate the API serves (tls_cert_file,
// tls_key_file), replaced by reload without a restart: a renewed
// certificate (certbot, cert-manager) is picked up on SIGHUP, and
// connections open meanwhile keep the one they started with.
type certificate struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// loadCertificate reads the pair, or returns nil when neither file is set.
// Setting one without the other, an unreadable file or a key that does not
// match the certificate is an error naming the keys.
func loadCertificate(certFile, keyFile string) (*certificate, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case keyFile == "":
		return nil, errors.New("tls_cert_file is set but tls_key_file is not: set both, or neither for plain HTTP")
	case certFile == "":
		return nil, errors.New("tls_key_file is set but tls_cert_file is not: set both, or neither for plain HTTP")
	}
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the files again; on an error the certificate in use stays.
func (c *certificate) reload() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls_cert_file %s, tls_key_file %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert.Store(&pair)
	return nil
}

// config returns the server's TLS configuration. HTTP/2 is offered first
// (http.Server.ServeTLS adds it): a browser then multiplexes every stream
// to one origin on one connection instead of at most six HTTP/1.1 ones.
func (c *certificate) config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.cert.Load(), nil },
	}
}

// serve serves srv on ln, over TLS when cert is not nil.
func serve(srv *http.Server, ln net.Listener, cert *certificate) error {
	if cert == nil {
		// Parked streams' connections come back through it (TLS streams
		// are not parked).
		return srv.Serve(httpstream.NewListener(ln))
	}
	srv.TLSConfig = cert.config()
	return srv.ServeTLS(ln, "", "")
}
