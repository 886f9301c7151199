package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// signature returns the Standard Webhooks signature of a message: "v1,"
// and the base64 HMAC-SHA256 with secret of "<id>.<timestamp>.<body>".
func signature(secret []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// signatures returns the webhook-signature header of a message: one
// signature per secret, space-separated (a rotated secret signs along with
// the new one during its grace period).
func signatures(secrets [][]byte, id string, timestamp int64, body []byte) string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = signature(s, id, timestamp, body)
	}
	return strings.Join(out, " ")
}
