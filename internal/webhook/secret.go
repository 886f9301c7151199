package webhook

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/postgres"
)

// Signing secrets must be recoverable, since Sluice signs with them, so
// they cannot be hashed like passwords. They are sealed with AES-256-GCM
// under a key that is not in the webhooks table: by default a key Sluice
// makes once and keeps in sluice.settings (which protects a dump or a
// leak of the webhooks table, not of the whole database), or, with
// webhook_secret_key_file, a key that never enters Postgres. A sealed
// secret is the key's id (8 bytes), a nonce and the ciphertext; the
// webhook's id is authenticated with it, so a sealed secret copied to
// another webhook does not open.

// secretPrefix starts every secret as shown, as Standard Webhooks
// libraries expect.
const secretPrefix = "whsec_"

// secretBytes is the size of a new signing secret (Standard Webhooks: 24
// to 64).
const secretBytes = 32

// newSecret returns a random signing secret.
func newSecret() []byte {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// showSecret returns the text form of secret, shown once to the admin.
func showSecret(secret []byte) string {
	return secretPrefix + base64.StdEncoding.EncodeToString(secret)
}

// keySetting is the sluice.settings key of the key kept in Postgres.
const keySetting = "webhook_secret_key"

// Keys seal and open signing secrets. It is safe for concurrent use.
type Keys struct {
	seal  sealKey   // seals new secrets
	other []sealKey // also open
}

type sealKey struct {
	id   []byte
	aead cipher.AEAD
}

func newSealKey(raw []byte) (sealKey, error) {
	if len(raw) != 32 {
		return sealKey{}, fmt.Errorf("the key is %d bytes, want 32", len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return sealKey{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealKey{}, err
	}
	sum := sha256.Sum256(raw)
	return sealKey{id: sum[:8], aead: aead}, nil
}

// CheckKeyFile reports what is wrong with webhook_secret_key_file, file,
// if anything: the daemon checks it before Postgres starts, so that a
// wrong file stops it at once rather than after initdb and migrations.
// ("" is no file: the key is kept in sluice.settings.)
func CheckKeyFile(file string) error {
	if file == "" {
		return nil
	}
	_, err := readKeyFile(file)
	return err
}

// readKeyFile reads and decodes the key of webhook_secret_key_file.
func readKeyFile(file string) (sealKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return sealKey{}, fmt.Errorf("webhook_secret_key_file: %w", err)
	}
	k, err := decodeKey(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
	if err != nil {
		return sealKey{}, fmt.Errorf("webhook_secret_key_file %s: %w", file, err)
	}
	return k, nil
}

// LoadKeys returns the keys of store's secrets: the key in file when it is
// not empty (base64 of 32 bytes; a final newline is not part of it), else
// the key kept in Postgres, made on first use. With a file, secrets sealed
// with the Postgres key are sealed again with the file's, and the Postgres
// key is then deleted.
func LoadKeys(ctx context.Context, store *postgres.DB, file string) (*Keys, error) {
	if file == "" {
		v, err := store.SettingOrSet(ctx, keySetting, base64.StdEncoding.EncodeToString(newSecret()))
		if err != nil {
			return nil, fmt.Errorf("webhook secret key: %w", err)
		}
		k, err := decodeKey(v)
		if err != nil {
			return nil, fmt.Errorf("webhook secret key in sluice.settings: %w", err)
		}
		return &Keys{seal: k}, nil
	}
	k, err := readKeyFile(file)
	if err != nil {
		return nil, err
	}
	keys := &Keys{seal: k}
	v, ok, err := store.Setting(ctx, keySetting)
	if err != nil {
		return nil, fmt.Errorf("webhook secret key: %w", err)
	}
	if !ok {
		return keys, nil
	}
	old, err := decodeKey(v)
	if err != nil {
		return nil, fmt.Errorf("webhook secret key in sluice.settings: %w", err)
	}
	keys.other = []sealKey{old}
	if _, err := store.ResealWebhookSecrets(ctx, k.id, func(id int64, sealed []byte) ([]byte, error) {
		secret, err := keys.Open(id, sealed)
		if err != nil {
			return nil, err
		}
		return keys.Seal(id, secret)
	}); err != nil {
		return nil, fmt.Errorf("seal webhook secrets with the key of webhook_secret_key_file: %w", err)
	}
	if err := store.DeleteSetting(ctx, keySetting); err != nil {
		return nil, fmt.Errorf("delete the webhook secret key kept in Postgres: %w", err)
	}
	return keys, nil
}

func decodeKey(s string) (sealKey, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return sealKey{}, errors.New("not base64")
	}
	return newSealKey(raw)
}

// aad binds a sealed secret to its webhook.
func aad(id int64) []byte { return []byte("sluice webhook " + strconv.FormatInt(id, 10)) }

// Seal returns secret sealed for webhook id.
func (k *Keys) Seal(id int64, secret []byte) ([]byte, error) {
	nonce := make([]byte, k.seal.aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := append(append([]byte{}, k.seal.id...), nonce...)
	return k.seal.aead.Seal(out, nonce, secret, aad(id)), nil
}

// Open returns the secret of webhook id sealed as sealed.
func (k *Keys) Open(id int64, sealed []byte) ([]byte, error) {
	if len(sealed) < 8 {
		return nil, fmt.Errorf("webhook %d: the sealed secret is too short", id)
	}
	for _, key := range append([]sealKey{k.seal}, k.other...) {
		if !bytes.Equal(key.id, sealed[:8]) {
			continue
		}
		n := key.aead.NonceSize()
		if len(sealed) < 8+n {
			return nil, fmt.Errorf("webhook %d: the sealed secret is too short", id)
		}
		secret, err := key.aead.Open(nil, sealed[8:8+n], sealed[8+n:], aad(id))
		if err != nil {
			return nil, fmt.Errorf("webhook %d: the secret does not open: %w", id, err)
		}
		return secret, nil
	}
	return nil, fmt.Errorf("webhook %d: its secret is sealed with a key this replica does not have (key id %x): give every replica the same webhook_secret_key_file", id, sealed[:8])
}
