package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// A JSON Web Key Set (RFC 7517) is parsed here with the standard library:
// only public keys for signatures are needed (RSA, EC and OKP Ed25519),
// which is a page of code, not a dependency.

// publicKey is one verification key of a JWKS, pinned to one algorithm
// (or the HS256 secret, see hs256ID).
type publicKey struct {
	kid string
	alg string // RS256, PS256, ES256, EdDSA, …
	key any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	// id identifies the key with its algorithm (keyID): a credential
	// verified by it carries it (sluice.Credential.JWTKey), so that its
	// streams end when the key leaves the set.
	id string
}

// keyID returns the identity of public key key used with alg: the
// algorithm and the SHA-256 of the key's DER (PKIX) encoding. The kid is
// not part of it: it names the key, and the key is what is trusted, so a
// key kept under another kid still counts as there. The algorithm is: a
// key is used only with its own (see JWT.key), so a set that keeps the
// key for another one no longer verifies what it verified.
func keyID(alg string, key any) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return alg + ":" + base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// jwk is one key as JSON. Unknown members are ignored, as RFC 7517 asks.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
}

// minRSABits is the smallest RSA modulus accepted (NIST SP 800-131A).
const minRSABits = 2048

// parseJWKS returns the signature keys of the JWKS b: {"keys":[…]}, or a
// single key object. Keys marked "use":"enc" are skipped. A private key, a
// symmetric key, an unknown key type or curve, an algorithm that does not
// fit its key, a duplicate kid or a set with no signature key is an error,
// so that a mistake shows at start rather than as refused JWTs.
func parseJWKS(b []byte) ([]publicKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
		Kty  string            `json:"kty"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	raw := set.Keys
	if set.Kty != "" {
		raw = []json.RawMessage{bytes.TrimSpace(b)}
	}
	var keys []publicKey
	kids := map[string]bool{}
	for i, r := range raw {
		var k jwk
		if err := json.Unmarshal(r, &k); err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		if k.Use == "enc" {
			continue
		}
		pk, err := k.publicKey()
		if err != nil {
			name := fmt.Sprintf("key %d", i)
			if k.Kid != "" {
				name += fmt.Sprintf(" (kid %q)", k.Kid)
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if k.Kid != "" {
			if kids[k.Kid] {
				return nil, fmt.Errorf("two keys have kid %q", k.Kid)
			}
			kids[k.Kid] = true
		}
		keys = append(keys, pk)
	}
	if len(keys) == 0 {
		return nil, errors.New("no signature key in the set")
	}
	return keys, nil
}

// publicKeyAlgs returns every algorithm a JWKS key may be used with.
func publicKeyAlgs() []string {
	return append(rsaAlgs(), "ES256", "ES384", "ES512", "EdDSA")
}

// rsaAlgs returns the algorithms an RSA key may be used with.
func rsaAlgs() []string { return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"} }

// ecCurve returns the curve crv and the one algorithm its keys are used
// with (RFC 7518 3.4).
func ecCurve(crv string) (alg string, curve elliptic.Curve, ok bool) {
	switch crv {
	case "P-256":
		return "ES256", elliptic.P256(), true
	case "P-384":
		return "ES384", elliptic.P384(), true
	case "P-521":
		return "ES512", elliptic.P521(), true
	}
	return "", nil, false
}

func (k jwk) publicKey() (publicKey, error) {
	if k.D != "" {
		return publicKey{}, errors.New("holds a private key (d): give only public keys")
	}
	pk := publicKey{kid: k.Kid, alg: k.Alg}
	switch k.Kty {
	case "RSA":
		if pk.alg == "" {
			pk.alg = "RS256"
		}
		if !slices.Contains(rsaAlgs(), pk.alg) {
			return publicKey{}, fmt.Errorf("alg %q does not fit an RSA key (want one of %s)", pk.alg, strings.Join(rsaAlgs(), ", "))
		}
		n, err := b64Int(k.N)
		if err != nil {
			return publicKey{}, fmt.Errorf("n: %w", err)
		}
		e, err := b64Int(k.E)
		if err != nil {
			return publicKey{}, fmt.Errorf("e: %w", err)
		}
		if n.BitLen() < minRSABits {
			return publicKey{}, fmt.Errorf("RSA modulus of %d bits; at least %d are needed", n.BitLen(), minRSABits)
		}
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
			return publicKey{}, errors.New("e is not a valid RSA exponent")
		}
		pk.key = &rsa.PublicKey{N: n, E: int(e.Int64())}
	case "EC":
		alg, curve, ok := ecCurve(k.Crv)
		if !ok {
			return publicKey{}, fmt.Errorf("curve %q is not supported (P-256, P-384, P-521)", k.Crv)
		}
		if pk.alg == "" {
			pk.alg = alg
		}
		if pk.alg != alg {
			return publicKey{}, fmt.Errorf("alg %q does not fit curve %s (want %s)", pk.alg, k.Crv, alg)
		}
		size := (curve.Params().BitSize + 7) / 8
		x, err := b64Fixed(k.X, size)
		if err != nil {
			return publicKey{}, fmt.Errorf("x: %w", err)
		}
		y, err := b64Fixed(k.Y, size)
		if err != nil {
			return publicKey{}, fmt.Errorf("y: %w", err)
		}
		// The parse checks the point is on the curve.
		key, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
		if err != nil {
			return publicKey{}, err
		}
		pk.key = key
	case "OKP":
		if k.Crv != "Ed25519" {
			return publicKey{}, fmt.Errorf("curve %q is not supported (Ed25519)", k.Crv)
		}
		if pk.alg == "" {
			pk.alg = "EdDSA"
		}
		if pk.alg != "EdDSA" {
			return publicKey{}, fmt.Errorf("alg %q does not fit an Ed25519 key (want EdDSA)", pk.alg)
		}
		x, err := b64Fixed(k.X, ed25519.PublicKeySize)
		if err != nil {
			return publicKey{}, fmt.Errorf("x: %w", err)
		}
		pk.key = ed25519.PublicKey(x)
	case "oct":
		return publicKey{}, errors.New("a symmetric key: set it as jwt_hs256_secret instead")
	default:
		return publicKey{}, fmt.Errorf("key type %q is not supported (RSA, EC, OKP)", k.Kty)
	}
	id, err := keyID(pk.alg, pk.key)
	if err != nil {
		return publicKey{}, err
	}
	pk.id = id
	return pk, nil
}

// b64 decodes base64url without padding, as JWK members are written;
// padding some tools add is tolerated.
func b64(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("missing")
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, errors.New("not base64url")
	}
	return b, nil
}

func b64Int(s string) (*big.Int, error) {
	b, err := b64(s)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}

// b64Fixed decodes a coordinate, which RFC 7518 requires to be exactly
// size bytes.
func b64Fixed(s string, size int) ([]byte, error) {
	b, err := b64(s)
	if err != nil {
		return nil, err
	}
	if len(b) != size {
		return nil, fmt.Errorf("%d bytes, want %d", len(b), size)
	}
	return b, nil
}
