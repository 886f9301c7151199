package engine

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice"
)

// A page of a diff leaves out documents the reader sees no difference in
// (one whose only change is to a field hidden from the reader, say), and
// its next names only a document it shows. When a page reads as much of
// the store as it may (diffScanReads) and ends on documents it left out,
// the next page goes on after the last of them, which the cursor must
// not name: it is that id sealed (AES-256-GCM) with a key kept in
// Postgres, made on first use, so that every replica opens it, and
// bound to the diff (database, from, to, type=, id=) and the reader's
// role. A cursor that a client could make, or use with another diff,
// would tell whether documents were left out where it points: it
// positions nothing but the diff that gave it.

// sealedPrefix starts a sealed cursor: no document id starts with it (a
// class name is a GraphQL name).
const sealedPrefix = "~"

// diffCursorSetting names the key of sealed cursors in sluice.settings.
const diffCursorSetting = "diff_cursor_key"

// cursorKey is the AEAD of sealed cursors, read once.
type cursorKey struct {
	mu   sync.Mutex
	aead cipher.AEAD
}

// diffCursorAEAD returns the AEAD of sealed cursors, reading (or making)
// its key the first time.
func (e *Engine) diffCursorAEAD(ctx context.Context) (cipher.AEAD, error) {
	e.cursorKey.mu.Lock()
	defer e.cursorKey.mu.Unlock()
	if e.cursorKey.aead != nil {
		return e.cursorKey.aead, nil
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	v, err := e.store.SettingOrSet(ctx, diffCursorSetting, base64.StdEncoding.EncodeToString(key))
	if err != nil {
		return nil, fmt.Errorf("diff cursor key: %w", err)
	}
	if key, err = base64.StdEncoding.DecodeString(v); err != nil || len(key) != 32 {
		return nil, fmt.Errorf("diff cursor key in sluice.settings: want base64 of 32 bytes (%v)", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if e.cursorKey.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	return e.cursorKey.aead, nil
}

// cursorAAD binds a sealed cursor to its diff and reader's role.
func cursorAAD(d *sluice.Database, role sluice.Role, q DiffQuery, to sluice.Position) []byte {
	return fmt.Appendf(nil, "sluice diff cursor\x00%d\x00%s\x00%s\x00%s\x00%s\x00%s\x00%d", d.ID, d.Epoch, q.From, to, q.Type, q.ID, role)
}

// sealDiffCursor returns the cursor of the page of diff q (to its to)
// that goes on after document id, which it does not name.
func (e *Engine) sealDiffCursor(ctx context.Context, d *sluice.Database, role sluice.Role, q DiffQuery, to sluice.Position, id string) (string, error) {
	aead, err := e.diffCursorAEAD(ctx)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := aead.Seal(nonce, nonce, []byte(id), cursorAAD(d, role, q, to))
	return sealedPrefix + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// openDiffCursor returns the document id that cursor, sealed by
// sealDiffCursor for diff q (to its to) and role, goes on after.
func (e *Engine) openDiffCursor(ctx context.Context, d *sluice.Database, role sluice.Role, q DiffQuery, to sluice.Position, cursor string) (string, error) {
	bad := sluice.Errorf(sluice.CodeInvalid, "query parameter after is not a cursor of this diff: pass a page's next back with the same from, to, type and id")
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(cursor, sealedPrefix))
	if err != nil {
		return "", bad
	}
	aead, err := e.diffCursorAEAD(ctx)
	if err != nil {
		return "", err
	}
	if len(raw) < aead.NonceSize() {
		return "", bad
	}
	id, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], cursorAAD(d, role, q, to))
	if err != nil {
		return "", bad
	}
	return string(id), nil
}
