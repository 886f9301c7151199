package sluice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDecodeError(t *testing.T) {
	type body struct {
		Name  string            `json:"name"`
		IDs   []string          `json:"ids"`
		Sizes []int             `json:"sizes"`
		Tags  map[string]string `json:"tags"`
		On    *bool             `json:"on"`
		Sub   struct {
			Ratio float64 `json:"ratio"`
		} `json:"sub"`
	}
	for in, want := range map[string]string{
		`{"name":{}}`:            `field "name": expected a string, got an object`,
		`{"ids":"x"}`:            `field "ids": expected an array of strings, got a string`,
		`{"sizes":[1,"2"]}`:      `field "sizes": expected a whole number, got a string`,
		`{"sizes":{}}`:           `field "sizes": expected an array of whole numbers, got an object`,
		`{"tags":[]}`:            `field "tags": expected an object, got an array`,
		`{"on":"yes"}`:           `field "on": expected true or false, got a string`,
		`{"sub":{"ratio":true}}`: `field "sub.ratio": expected a number, got true or false`,
		`[]`:                     `expected an object, got an array`,
		`{"name":`:               `invalid JSON: it ends before it is complete`,
		`{"name" "x"}`:           `invalid JSON: an unexpected character '"' at byte 8 (counting from 0)`,
	} {
		var b body
		err := DecodeError(json.Unmarshal([]byte(in), &b))
		if err.Code != CodeInvalid || err.Message != want {
			t.Errorf("%s: %s %q, want %q", in, err.Code, err.Message, want)
		}
		if strings.Contains(err.Message, "Go") || strings.Contains(err.Message, "json:") {
			t.Errorf("%s: decoder text in %q", in, err.Message)
		}
	}
	// Past encoding/json's 10,000 levels, its error names the character
	// that opens one level too many, which is valid JSON: it was said
	// to be "an unexpected character '['".
	deep := `{"tags":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`
	if err := DecodeError(json.Unmarshal([]byte(deep), new(body))); err.Message != "invalid JSON: it nests arrays and objects more than 10000 levels deep, at byte 10007 (counting from 0)" {
		t.Errorf("%.20s…: %q", deep, err.Message)
	}
	dec := json.NewDecoder(strings.NewReader(`{"nmae":"x"}`))
	dec.DisallowUnknownFields()
	var b body
	if err := DecodeError(dec.Decode(&b)); err.Message != `unknown field "nmae"` {
		t.Errorf("unknown field: %q", err.Message)
	}
	// A long unknown name is repeated as Echo shows a value: it was
	// repeated whole (found by FuzzSmallBodies in internal/rest).
	dec = json.NewDecoder(strings.NewReader(`{"` + strings.Repeat("k", 3000) + `":1}`))
	dec.DisallowUnknownFields()
	if err := DecodeError(dec.Decode(&b)); err.Message != "unknown field "+Echo(strings.Repeat("k", 3000)) {
		t.Errorf("a long unknown field: %.200q", err.Message)
	}
}

// TestShow: the one mapping from an error to what a client sees and how
// it is logged, for every transport.
func TestShow(t *testing.T) {
	driver := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	for _, c := range []struct {
		name    string
		err     error
		code    Code
		msg     string
		status  int
		graphql string
		refused string
		retry   string
		level   slog.Level
	}{
		{"invalid", Errorf(CodeInvalid, "bad id"), CodeInvalid, "bad id", 400, "BAD_USER_INPUT", "BAD_REQUEST", "", slog.LevelDebug},
		{"wrapped", fmt.Errorf("read: %w", Errorf(CodeNotFound, "no such database")), CodeNotFound, "no such database", 404, "NOT_FOUND", "NOT_FOUND", "", slog.LevelDebug},
		{"too large", Errorf(CodeTooLarge, "big"), CodeTooLarge, "big", 413, "PAYLOAD_TOO_LARGE", "BAD_REQUEST", "", slog.LevelDebug},
		{"media type", Errorf(CodeUnsupportedMedia, "not JSON"), CodeUnsupportedMedia, "not JSON", 415, "UNSUPPORTED_MEDIA_TYPE", "BAD_REQUEST", "", slog.LevelDebug},
		{"too many", Errorf(CodeTooMany, "slow down"), CodeTooMany, "slow down", 429, "TOO_MANY_REQUESTS", "TOO_MANY_REQUESTS", "5", slog.LevelDebug},
		{"own retry", &Error{Code: CodeTooMany, Message: "wait", Retry: 1500 * time.Millisecond}, CodeTooMany, "wait", 429, "TOO_MANY_REQUESTS", "TOO_MANY_REQUESTS", "2", slog.LevelDebug},
		{"outage", errors.Join(ErrStorageUnavailable, driver), CodeUnavailable, ErrStorageUnavailable.Message, 503, "UNAVAILABLE", "UNAVAILABLE", "2", slog.LevelInfo},
		{"cancelled", fmt.Errorf("read: %w", context.Canceled), CodeUnavailable, "the request was cancelled", 503, "UNAVAILABLE", "UNAVAILABLE", "2", slog.LevelDebug},
		{"deadline", context.DeadlineExceeded, CodeUnavailable, "the request was cancelled", 503, "UNAVAILABLE", "UNAVAILABLE", "2", slog.LevelDebug},
		{"driver", driver, CodeInternal, "internal error", 500, "INTERNAL_SERVER_ERROR", "INTERNAL_SERVER_ERROR", "", slog.LevelError},
		{"unknown code", &Error{Code: "Mystery", Message: "m"}, "Mystery", "m", 500, "INTERNAL_SERVER_ERROR", "INTERNAL_SERVER_ERROR", "", slog.LevelError},
	} {
		sh := Show(c.err)
		if sh.Code != c.code || sh.Message != c.msg || sh.RetryAfter != c.retry || sh.Level != c.level {
			t.Errorf("%s: %+v, want %s %q retry %q level %s", c.name, sh, c.code, c.msg, c.retry, c.level)
		}
		if s, g, r := sh.Code.HTTPStatus(), sh.Code.GraphQLCode(), sh.Code.RefusedGraphQLCode(); s != c.status || g != c.graphql || r != c.refused {
			t.Errorf("%s: %d %s %s, want %d %s %s", c.name, s, g, r, c.status, c.graphql, c.refused)
		}
		if ErrorCode(c.err) != sh.Code || ErrorMessage(c.err) != sh.Message {
			t.Errorf("%s: ErrorCode and ErrorMessage disagree with Show", c.name)
		}
		if strings.Contains(sh.Message, "dial") {
			t.Errorf("%s: the driver's text is shown: %q", c.name, sh.Message)
		}
	}
	// Every code has a row: none falls through to internal by accident.
	for _, c := range []Code{CodeInvalid, CodeUnauthenticated, CodeForbidden, CodeNotFound, CodeMethod, CodeNotAcceptable, CodeConflict,
		CodeGone, CodeTooLarge, CodeUnsupportedMedia, CodeHistoryGone, CodeTooMany, CodeUnavailable, CodeInternal} {
		if _, ok := codes[c]; !ok {
			t.Errorf("code %s has no row", c)
		}
	}
}

// TestShownLog: an error is logged at its level with its whole text; the
// log is not a client.
func TestShownLog(t *testing.T) {
	var b strings.Builder
	l := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo}))
	driver := errors.New("dial tcp: connection refused")
	Show(Errorf(CodeInvalid, "bad")).Log(context.Background(), l, "request failed", Errorf(CodeInvalid, "bad"))
	if b.Len() != 0 {
		t.Fatalf("a client's error logged at Info: %s", b.String())
	}
	Show(driver).Log(context.Background(), l, "request failed", driver, "path", "/x")
	if got := b.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "connection refused") || !strings.Contains(got, "code=InternalError") || !strings.Contains(got, "path=/x") {
		t.Fatalf("log: %s", got)
	}
}

func TestEcho(t *testing.T) {
	x100 := strings.Repeat("x", 100)
	for in, want := range map[string]string{
		"":              `""`,
		"a\"b":          `"a\"b"`,
		x100:            `"` + x100 + `"`,
		x100 + "y":      `"` + x100 + `"… (101 bytes)`,
		x100[:99] + "é": `"` + x100[:99] + `"… (101 bytes)`,
		x100[:98] + "é" + strings.Repeat("z", 900): `"` + x100[:98] + `é"… (1000 bytes)`,
		"\xff" + x100: `"\xff` + x100[:99] + `"… (101 bytes)`,
	} {
		if got := Echo(in); got != want {
			t.Errorf("Echo(%.20q…): %s, want %s", in, got, want)
		}
	}
}

func TestEchoPlain(t *testing.T) {
	x100 := strings.Repeat("x", 100)
	for in, want := range map[string]string{
		"Note/a":        "Note/a",
		"Person/zoë":    "Person/zoë",
		x100:            x100,
		x100 + "y":      `"` + x100 + `"… (101 bytes)`,
		"a\"b":          `"a\"b"`,
		"\u202eevil":    `"\u202eevil"`,
		"line\nbreak":   `"line\nbreak"`,
		"\xffnot utf-8": `"\xffnot utf-8"`,
	} {
		if got := EchoPlain(in); got != want {
			t.Errorf("EchoPlain(%.20q): %s, want %s", in, got, want)
		}
	}
}
