package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-dev/sluice"
)

// testKeys are one key of each kind with a JWKS that publishes them.
type testKeys struct {
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	ed   ed25519.PrivateKey
	jwks []byte
}

func newTestKeys(t testing.TB) *testKeys {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := &testKeys{rsa: rk, ec: ek, ed: edk}
	k.jwks = marshalJWKS(t, map[string]any{
		"rsa-1": &rk.PublicKey, "ec-1": &ek.PublicKey, "ed-1": edk.Public(),
	})
	return k
}

// marshalJWKS returns the JWKS of keys by kid, as an identity provider
// publishes it (no alg members: the key type decides).
func marshalJWKS(t testing.TB, keys map[string]any) []byte {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	var set []map[string]any
	for kid, k := range keys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			set = append(set, map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		case *ecdsa.PublicKey:
			b, err := k.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			n := (len(b) - 1) / 2
			set = append(set, map[string]any{"kty": "EC", "kid": kid, "crv": k.Curve.Params().Name, "x": b64(b[1 : 1+n]), "y": b64(b[1+n:])})
		case ed25519.PublicKey:
			set = append(set, map[string]any{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64(k)})
		default:
			t.Fatalf("key type %T", k)
		}
	}
	b, err := json.Marshal(map[string]any{"keys": set})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t testing.TB, m jwt.SigningMethod, kid string, claims jwt.MapClaims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const testSecret = "an-hs256-secret-of-at-least-32-bytes"

func TestJWTVerify(t *testing.T) {
	t.Parallel()
	keys := newTestKeys(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cfg := JWTConfig{Issuer: "https://id.example.com/", Audience: "sluice", Leeway: 10 * time.Second}
	v, err := NewJWT([]byte(testSecret), keys.jwks, cfg, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	exp := now.Add(time.Hour)
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "rita", "iss": cfg.Issuer, "aud": []string{"other", "sluice"}, "exp": exp.Unix(), "iat": now.Unix(), "nbf": now.Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&keys.rsa.PublicKey))})
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
		want  string // "" accepts; else part of the error
	}{
		{"HS256", sign(t, jwt.SigningMethodHS256, "", claims(nil), []byte(testSecret)), ""},
		{"RS256 with kid", sign(t, jwt.SigningMethodRS256, "rsa-1", claims(nil), keys.rsa), ""},
		{"RS256 without kid", sign(t, jwt.SigningMethodRS256, "", claims(nil), keys.rsa), ""},
		{"ES256", sign(t, jwt.SigningMethodES256, "ec-1", claims(nil), keys.ec), ""},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, "ed-1", claims(nil), keys.ed), ""},
		{"within leeway after exp", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-5 * time.Second).Unix() }), []byte(testSecret)), ""},

		{"HS256 wrong secret", sign(t, jwt.SigningMethodHS256, "", claims(nil), []byte("another-secret-of-at-least-32-bytes")), "signature is invalid"},
		{"RS256 other key", sign(t, jwt.SigningMethodRS256, "rsa-1", claims(nil), other), "verification error"},
		{"HS256 signed with the RSA public key", sign(t, jwt.SigningMethodHS256, "rsa-1", claims(nil), pubPEM), "signature is invalid"},
		{"RS256 header on the EC key", sign(t, jwt.SigningMethodRS256, "ec-1", claims(nil), keys.rsa), `key "ec-1" is for ES256, not RS256`},
		{"ES384 not configured", sign(t, jwt.SigningMethodES384, "", claims(nil), must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader))), "no key for ES384 in jwt_jwks_file"},
		{"alg none", sign(t, jwt.SigningMethodNone, "", claims(nil), jwt.UnsafeAllowNoneSignatureType), "signing method none is invalid"},
		{"unknown kid", sign(t, jwt.SigningMethodRS256, "rsa-2", claims(nil), keys.rsa), `no key with kid "rsa-2"`},
		{"expired", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }), []byte(testSecret)), "token is expired"},
		{"no exp", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { delete(c, "exp") }), []byte(testSecret)), "token is missing required claim: exp"},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }), []byte(testSecret)), "token is not valid yet"},
		{"issued in the future", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Minute).Unix() }), []byte(testSecret)), "token used before issued"},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com/" }), []byte(testSecret)), "token has invalid issuer"},
		{"wrong audience", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["aud"] = "other" }), []byte(testSecret)), "token has invalid audience"},
		{"no user", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { delete(c, "sub") }), []byte(testSecret)), `claim "sub"`},
		{"user not a string", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["sub"] = 7 }), []byte(testSecret)), `claim "sub"`},
		{"too long", sign(t, jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", maxJWTBytes) }), []byte(testSecret)), "longer than"},
		{"crit header", func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil))
			tok.Header["crit"] = []string{"b64"}
			return must(tok.SignedString([]byte(testSecret)))
		}(), "crit header"},
		{"tampered payload", tamper(sign(t, jwt.SigningMethodRS256, "rsa-1", claims(nil), keys.rsa)), "verification error"},
		// Validly signed, naming its user twice: Go would take the
		// second, another decoder the first.
		{"two sub claims", signRaw(t, `{"alg":"HS256","typ":"JWT"}`,
			fmt.Sprintf(`{"sub":"rita","iss":%q,"aud":"sluice","exp":%d,"sub":"admin"}`, cfg.Issuer, exp.Unix()), []byte(testSecret)), `the payload names "sub" twice`},
		{"two alg headers", signRaw(t, `{"alg":"none","alg":"HS256"}`,
			fmt.Sprintf(`{"sub":"rita","iss":%q,"aud":"sluice","exp":%d}`, cfg.Issuer, exp.Unix()), []byte(testSecret)), `the header names "alg" twice`},
	}
	// The identity of the key that verifies each accepted JWT.
	hs256 := hs256ID([]byte(testSecret))
	wantKeys := map[string]string{
		"HS256":                   hs256,
		"RS256 with kid":          must(keyID("RS256", &keys.rsa.PublicKey)),
		"RS256 without kid":       must(keyID("RS256", &keys.rsa.PublicKey)),
		"ES256":                   must(keyID("ES256", &keys.ec.PublicKey)),
		"EdDSA":                   must(keyID("EdDSA", keys.ed.Public())),
		"within leeway after exp": hs256,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			user, expires, key, err := v.Verify(tt.token)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if user != "rita" {
					t.Errorf("user %q, want rita", user)
				}
				if key != wantKeys[tt.name] || !v.HasKey(key) {
					t.Errorf("key %q (in the set: %v), want %q", key, v.HasKey(key), wantKeys[tt.name])
				}
				var wantExp time.Time
				if strings.Contains(tt.name, "leeway") {
					wantExp = now.Add(-5 * time.Second).Add(cfg.Leeway)
				} else {
					wantExp = exp.Add(cfg.Leeway)
				}
				if !expires.Equal(wantExp) {
					t.Errorf("expires %v, want %v (exp plus the leeway)", expires, wantExp)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted (user %q), want an error with %q", user, tt.want)
			}
			if sluice.ErrorCode(err) != sluice.CodeUnauthenticated || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v (%s), want Unauthenticated with %q", err, sluice.ErrorCode(err), tt.want)
			}
		})
	}
}

// signRaw returns the HS256 JWT of header and payload as given (JSON
// that the jwt package would not write), signed with secret.
func signRaw(t *testing.T, header, payload string, secret []byte) string {
	t.Helper()
	input := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	sig, err := jwt.SigningMethodHS256.Sign(input, secret)
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// tamper changes the payload's user, keeping the signature.
func tamper(token string) string {
	parts := strings.Split(token, ".")
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(p), `"rita"`, `"root"`, 1)))
	return strings.Join(parts, ".")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestJWTOnlyConfiguredAlgorithms: with only a JWKS, an HS256 token is
// refused whatever it is signed with; with only a secret, RS256 is.
func TestJWTOnlyConfiguredAlgorithms(t *testing.T) {
	t.Parallel()
	keys := newTestKeys(t)
	claims := jwt.MapClaims{"sub": "rita", "exp": time.Now().Add(time.Hour).Unix()}
	onlyKeys, err := NewJWT(nil, keys.jwks, JWTConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pubDER := must(x509.MarshalPKIXPublicKey(&keys.rsa.PublicKey))
	if _, _, _, err := onlyKeys.Verify(sign(t, jwt.SigningMethodHS256, "rsa-1", claims, pubDER)); err == nil || !strings.Contains(err.Error(), "signing method HS256 is invalid") {
		t.Errorf("HS256 with only a JWKS: %v, want signing method HS256 is invalid", err)
	}
	onlySecret, err := NewJWT([]byte(testSecret), nil, JWTConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := onlySecret.Verify(sign(t, jwt.SigningMethodRS256, "", claims, keys.rsa)); err == nil || !strings.Contains(err.Error(), "signing method RS256 is invalid") {
		t.Errorf("RS256 with only a secret: %v, want signing method RS256 is invalid", err)
	}
}

func TestNewJWTErrors(t *testing.T) {
	t.Parallel()
	if _, err := NewJWT([]byte("short"), nil, JWTConfig{}, nil); err == nil || !strings.Contains(err.Error(), "at least 32") || strings.Contains(err.Error(), "short") {
		t.Errorf("short secret: %v, want an error that does not show it", err)
	}
	if _, err := NewJWT(nil, nil, JWTConfig{}, nil); err == nil {
		t.Error("no secret and no keys: accepted")
	}
}

func TestParseJWKS(t *testing.T) {
	t.Parallel()
	rk := must(rsa.GenerateKey(rand.Reader, 2048))
	small := must(rsa.GenerateKey(rand.Reader, 1024))
	b64 := base64.RawURLEncoding.EncodeToString
	n, e := b64(rk.N.Bytes()), b64(big.NewInt(int64(rk.E)).Bytes())
	ek := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	eb := must(ek.PublicKey.Bytes())
	x, y := b64(eb[1:33]), b64(eb[33:])
	tests := []struct {
		name, jwks string
		want       string // "" parses; else part of the error
		algs       []string
	}{
		{"RSA and EC", `{"keys":[{"kty":"RSA","kid":"a","n":"` + n + `","e":"` + e + `"},{"kty":"EC","crv":"P-256","x":"` + x + `","y":"` + y + `"}]}`, "", []string{"RS256", "ES256"}},
		{"alg given", `{"keys":[{"kty":"RSA","alg":"PS384","n":"` + n + `","e":"` + e + `"}]}`, "", []string{"PS384"}},
		{"a single key", `{"kty":"EC","crv":"P-256","x":"` + x + `","y":"` + y + `"}`, "", []string{"ES256"}},
		{"encryption keys skipped", `{"keys":[{"kty":"RSA","use":"enc","n":"` + n + `","e":"` + e + `"},{"kty":"EC","crv":"P-256","x":"` + x + `","y":"` + y + `"}]}`, "", []string{"ES256"}},
		{"not JSON", `{`, "not a JSON Web Key Set", nil},
		{"empty", `{"keys":[]}`, "no signature key", nil},
		{"private key", `{"keys":[{"kty":"RSA","n":"` + n + `","e":"` + e + `","d":"AQAB"}]}`, "private key", nil},
		{"symmetric key", `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, "jwt_hs256_secret", nil},
		{"unknown type", `{"keys":[{"kty":"XYZ"}]}`, `key type "XYZ"`, nil},
		{"alg that does not fit", `{"keys":[{"kty":"EC","alg":"ES384","crv":"P-256","x":"` + x + `","y":"` + y + `"}]}`, "does not fit curve P-256", nil},
		{"HS256 on an RSA key", `{"keys":[{"kty":"RSA","alg":"HS256","n":"` + n + `","e":"` + e + `"}]}`, "does not fit an RSA key", nil},
		{"small RSA key", `{"keys":[{"kty":"RSA","n":"` + b64(small.N.Bytes()) + `","e":"` + e + `"}]}`, "1024 bits", nil},
		{"point off the curve", `{"keys":[{"kty":"EC","crv":"P-256","x":"` + x + `","y":"` + x + `"}]}`, "key 0", nil},
		{"short coordinate", `{"keys":[{"kty":"EC","crv":"P-256","x":"AQAB","y":"` + y + `"}]}`, "x: 3 bytes, want 32", nil},
		{"duplicate kid", `{"keys":[{"kty":"RSA","kid":"a","n":"` + n + `","e":"` + e + `"},{"kty":"RSA","kid":"a","n":"` + n + `","e":"` + e + `"}]}`, `two keys have kid "a"`, nil},
		{"even exponent", `{"keys":[{"kty":"RSA","n":"` + n + `","e":"Ag"}]}`, "not a valid RSA exponent", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keys, err := parseJWKS([]byte(tt.jwks))
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want one with %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var algs []string
			for _, k := range keys {
				algs = append(algs, k.alg)
			}
			if strings.Join(algs, ",") != strings.Join(tt.algs, ",") {
				t.Errorf("algorithms %v, want %v", algs, tt.algs)
			}
		})
	}
}

// FuzzJWTVerify: no input makes Verify panic, and none is accepted without
// the secret (the fuzzer cannot forge an HMAC).
func FuzzJWTVerify(f *testing.F) {
	now := time.Now()
	f.Add(sign(f, jwt.SigningMethodHS256, "", jwt.MapClaims{"sub": "rita", "exp": now.Add(time.Hour).Unix()}, []byte("another-secret-of-at-least-32-bytes")))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJyaXRhIn0.")
	f.Add("a.b.c")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","alg":"none"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"a","sub":"b","exp":9999999999}`)) + ".x")
	v, err := NewJWT([]byte(testSecret), nil, JWTConfig{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		if user, _, _, err := v.Verify(token); err == nil {
			t.Fatalf("accepted %q as %q", token, user)
		}
	})
}

// FuzzParseJWKS: no key set makes the parser panic.
func FuzzParseJWKS(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AQAB","y":"AQAB"}]}`))
	f.Add([]byte(`{"kty":"RSA","n":"AQAB","e":"AQAB"}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AQAB"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseJWKS(b)
	})
}

// TestJWKSURLErrorsHideThePassword: an error about jwt_jwks_url never
// shows a password the URL holds (it goes to the log and the terminal):
// not when the URL is refused, nor when a fetch fails (Reload's error,
// the log of an unknown kid's fetch), and the error of a JWT once the set
// is stale, which answers clients, says nothing of why the fetches fail
// (found by review: fetch errors showed the URL as configured, and a stale
// set answered every JWT with the last one).
func TestJWKSURLErrorsHideThePassword(t *testing.T) {
	t.Run("fetches", func(t *testing.T) {
		key := ecKey(t)
		srv := newJWKSServer(t, marshalJWKS(t, map[string]any{"k": &key.PublicKey}))
		clk := &clock{now: time.Now()}
		var log bytes.Buffer
		var logMu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &log, mu: &logMu}, nil))
		raw := strings.Replace(srv.URL, "http://", "http://idp-user:s3cret-pass@", 1) + "/jwks"
		v, err := LoadJWT(t.Context(), JWTConfig{JWKSURL: raw, JWKSHTTPLoopback: true}, JWTDeps{Now: clk.Now, Client: srv.Client(), Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		hidden := func(what string, err error) {
			t.Helper()
			if err == nil || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: %v", what, err)
			}
		}
		for _, answer := range []struct {
			body   []byte
			status int
		}{
			{[]byte(`{"error":"unavailable"}`), 503},
			{[]byte(`{"keys":`), 200},
			{bytes.Repeat([]byte(" "), jwksMaxBytes+1), 200},
		} {
			srv.publish(answer.body, answer.status)
			err := v.Reload(t.Context())
			hidden("Reload of a set answered "+strconv.Itoa(answer.status), err)
			if err != nil && !strings.Contains(err.Error(), "idp-user:xxxxx@") {
				t.Errorf("Reload's error does not show the URL redacted: %v", err)
			}
		}
		token := sign(t, jwt.SigningMethodES256, "unknown", jwt.MapClaims{"sub": "rita", "exp": clk.Now().Add(time.Hour).Unix()}, key)
		_, _, _, err = v.Verify(token)
		hidden("a JWT of an unknown kid", err)
		clk.add(jwksMaxStale + time.Hour)
		_, _, _, err = v.Verify(sign(t, jwt.SigningMethodES256, "k", jwt.MapClaims{"sub": "rita", "exp": clk.Now().Add(time.Hour).Unix()}, key))
		hidden("a JWT once the set is stale", err)
		if err != nil && (strings.Contains(err.Error(), "GET") || !strings.Contains(err.Error(), "stale")) {
			t.Errorf("a JWT once the set is stale: %v, want the set said stale and nothing of why", err)
		}
		srv.Close()
		hidden("Reload with the server gone", v.Reload(t.Context()))
		logMu.Lock()
		defer logMu.Unlock()
		if !strings.Contains(log.String(), "unknown kid") || strings.Contains(log.String(), "s3cret") {
			t.Errorf("the log: %s", log.String())
		}
	})

	for _, raw := range []string{
		"http://user:s3cret-pass@example.com/jwks",  // http, not loopback
		"ftp://user:s3cret-pass@example.com/jwks",   // not http
		"https://user:s3cret-pass@example.com:bad/", // does not parse
	} {
		err := checkJWKSURL(raw, false)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "jwt_jwks_url") {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// lockedWriter is a writer for a logger used from several goroutines.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
