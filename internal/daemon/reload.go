package daemon

import (
	"context"
	"errors"

	"github.com/sluice-dev/sluice/internal/auth"
)

// reloadable is what Reload reads again: set by Run once it has loaded
// them.
type reloadable struct {
	jwt  *auth.JWT
	cert *certificate
}

// Reload reads again what an operator may replace while Sluice runs (on
// SIGHUP): the TLS certificate and key (tls_cert_file, tls_key_file) and
// the JWT key set (jwt_jwks_file, or a fetch of jwt_jwks_url). What fails
// to load stays as it was, and the error says why; what was not
// configured is skipped. It is safe to call at any time, also before Run
// has started (nothing is reloaded then).
func (d *Daemon) Reload(ctx context.Context) error {
	d.reloadMu.Lock()
	r := d.reload
	d.reloadMu.Unlock()
	var errs []error
	if r.cert != nil {
		if err := r.cert.reload(); err != nil {
			errs = append(errs, err)
		} else {
			d.logger.Info("reloaded the TLS certificate", "file", r.cert.certFile)
		}
	}
	if r.jwt != nil {
		switch err := r.jwt.Reload(ctx); {
		case errors.Is(err, auth.ErrNoKeySet):
		case err != nil:
			errs = append(errs, err)
		default:
			d.logger.Info("reloaded the JWT key set")
		}
	}
	return errors.Join(errs...)
}

func (d *Daemon) setReloadable(r reloadable) {
	d.reloadMu.Lock()
	d.reload = r
	d.reloadMu.Unlock()
}
