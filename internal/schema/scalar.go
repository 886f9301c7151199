package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
)

// maxBigIntDigits is the most digits a BigInt may have: as many as a
// Postgres numeric holds before the decimal point.
const maxBigIntDigits = 131072

// scalar checks a value of the built-in scalar name and returns it
// normalized (see ValidateDocument). Its CodeInvalid errors describe the
// value, not the field; the caller adds the field. To grown it adds how
// many bytes longer the numbers of a JSON value are in plain decimal form
// than written (see MaxNumberGrowth).
func scalar(name string, val any, grown *int) (any, error) {
	switch name {
	case sluice.ScalarString, sluice.ScalarID:
		s, ok := val.(string)
		if !ok {
			return nil, expected(name, val)
		}
		return s, checkText(s)
	case sluice.ScalarBoolean:
		b, ok := val.(bool)
		if !ok {
			return nil, expected(name, val)
		}
		return b, nil
	case sluice.ScalarInt:
		return intValue(val)
	case sluice.ScalarFloat:
		n, ok := number(val)
		if !ok {
			return nil, expected(name, val)
		}
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return nil, sluice.Errorf(sluice.CodeInvalid, "number %s is out of Float range", shorten(n))
		}
		return f, nil
	case sluice.ScalarDateTime:
		return dateTime(val)
	case sluice.ScalarBigInt:
		return bigInt(val)
	case sluice.ScalarJSON:
		return jsonValue(val, grown)
	}
	// Parse never makes a field of another scalar, so this is a bug in
	// whoever built the schema, not bad input.
	return nil, errors.New("schema: unknown scalar " + name)
}

// expected returns the error for a value of the wrong JSON type.
func expected(what string, val any) error {
	return sluice.Errorf(sluice.CodeInvalid, "expected %s, got %s", what, describe(val))
}

// checkText refuses strings Postgres cannot store: invalid UTF-8 and NUL.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return sluice.Errorf(sluice.CodeInvalid, "string is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return sluice.Errorf(sluice.CodeInvalid, `string contains a NUL character (\u0000), which cannot be stored`)
	}
	return nil
}

func intValue(val any) (int64, error) {
	const what = "Int (a whole number)"
	n, ok := number(val)
	if !ok {
		return 0, expected(what, val)
	}
	lit, ok := wholeNumber(n)
	if !ok {
		return 0, expected(what, val)
	}
	i, err := strconv.ParseInt(lit, 10, 32)
	if err != nil {
		return 0, sluice.Errorf(sluice.CodeInvalid, "number %s is out of Int range (%d to %d)", shorten(n), math.MinInt32, math.MaxInt32)
	}
	return i, nil
}

func dateTime(val any) (string, error) {
	const what = "DateTime (RFC 3339, such as 2024-08-01T16:00:00Z)"
	s, ok := val.(string)
	if !ok {
		return "", expected(what, val)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", expected(what, val)
	}
	if t.Nanosecond()%1000 != 0 {
		// Postgres keeps microseconds; storing would silently round.
		return "", sluice.Errorf(sluice.CodeInvalid, "DateTime %s is more precise than a microsecond, the most that is stored", quote(s))
	}
	t = t.UTC()
	// Outside years 1 to 9999 the RFC 3339 form of the UTC time does not
	// exist (an offset can push 9999-12-31 into year 10000).
	if t.Year() < 1 || t.Year() > 9999 {
		return "", sluice.Errorf(sluice.CodeInvalid, "DateTime %s is out of range (years 1 to 9999 in UTC)", quote(s))
	}
	return t.Format(time.RFC3339Nano), nil
}

func bigInt(val any) (string, error) {
	const what = "BigInt (a whole number or a string of decimal digits)"
	var lit string
	if s, ok := val.(string); ok {
		digits := strings.TrimPrefix(s, "-")
		if digits == "" || strings.Trim(digits, "0123456789") != "" {
			return "", expected(what, val)
		}
		lit = s
	} else {
		n, ok := number(val)
		if !ok {
			return "", expected(what, val)
		}
		if lit, ok = wholeNumber(n); !ok {
			return "", expected(what, val)
		}
	}
	neg := strings.HasPrefix(lit, "-")
	digits := strings.TrimLeft(strings.TrimPrefix(lit, "-"), "0")
	if len(digits) > maxBigIntDigits {
		return "", sluice.Errorf(sluice.CodeInvalid, "BigInt has more than %d digits", maxBigIntDigits)
	}
	switch {
	case digits == "":
		return "0", nil
	case neg:
		return "-" + digits, nil
	}
	return digits, nil
}

// jsonValue returns val as compact JSON, adding to grown how many bytes
// longer its numbers are in plain decimal form than written.
func jsonValue(val any, grown *int) (json.RawMessage, error) {
	if raw, ok := val.(json.RawMessage); ok {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&val); err != nil || d.Decode(new(any)) != io.EOF {
			return nil, sluice.Errorf(sluice.CodeInvalid, "expected JSON, got malformed JSON text")
		}
		if val == nil {
			return nil, sluice.Errorf(sluice.CodeInvalid, "expected JSON, got null; leave the field out instead")
		}
	}
	val, err := plainJSONValue(val, grown)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The value is data, not HTML: keep <, > and & as they are.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(val); err != nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "expected JSON, got a value JSON cannot encode")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// plainJSONValue refuses what Postgres jsonb cannot store: strings and
// keys that checkText refuses (jsonb refuses \u0000 too) and numbers
// outside the range of numeric. It returns val with each number as jsonb
// stores it, and so as every read of the document answers it (see
// plainForm.text): the value's image in the log (/api/history, /api/changes,
// streams, webhooks) then holds what reads hold, not the number as sent.
// It adds to grown how many bytes longer than written the numbers are in
// that form, whichever form the image keeps. Maps and slices of val are
// changed in place.
func plainJSONValue(val any, grown *int) (any, error) {
	switch x := val.(type) {
	case string:
		return x, checkText(x)
	case json.Number, float64, int, int64:
		n, ok := number(x)
		if !ok {
			return nil, sluice.Errorf(sluice.CodeInvalid, "expected JSON, got a value JSON cannot encode")
		}
		if !fitsNumeric(n) {
			return nil, sluice.Errorf(sluice.CodeInvalid, "number %s is too large or too precise to store", shorten(n))
		}
		form := plainFormOf(n)
		*grown += max(0, form.length-len(n))
		if p, ok := form.text(n, len(n)+maxNumberGrowth); ok {
			return json.Number(p), nil
		}
		// Kept as written: jsonb stores it all the same, and reads
		// answer it in plain form, but the log's image keeps it short
		// (see maxNumberGrowth).
		return json.Number(n), nil
	case []any:
		for i, e := range x {
			var err error
			if x[i], err = plainJSONValue(e, grown); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k, e := range x {
			if err := checkText(k); err != nil {
				return nil, err
			}
			var err error
			if x[k], err = plainJSONValue(e, grown); err != nil {
				return nil, err
			}
		}
	}
	return val, nil
}

// maxNumberGrowth bounds how much longer than written a number of a JSON
// value is made in plain decimal form (1e60 is 61 characters): a write
// holds its documents' images, budgeted by the JSON sent (write_bytes),
// and 0e-16383, 8 characters, would be 16,385. A number that would grow
// more keeps the form it was written in (1e100, 1.7976931348623157e+308)
// in the images of the log, where reads, from Postgres, answer it in
// plain form: refusing it would refuse floats any JSON encoder writes.
const maxNumberGrowth = 64

// text returns the JSON number n, which fitsNumeric accepts and whose
// plain form p is, as Postgres's numeric prints it, which is how jsonb
// stores it and every read answers it: in plain decimal form, with as
// many digits after the point as n has once its exponent is applied, and
// no sign on a zero (1E2 is 100, 1.50 stays 1.50, 1.0e-2 is 0.010, -0.0
// is 0.0). It returns false, having built nothing, when that is longer
// than maxLen.
func (p plainForm) text(n string, maxLen int) (string, bool) {
	if p.length > maxLen {
		return "", false
	}
	if p.asWritten {
		return n, true
	}
	// The integer part, and the digits after the point (before the
	// zeros that make them scale digits).
	neg := p.neg
	var intPart, fracPart string
	switch {
	case p.digits == "":
		neg, intPart = false, "0"
	case p.point <= 0:
		intPart, fracPart = "0", strings.Repeat("0", -p.point)+p.digits
	case p.point >= len(p.digits):
		intPart = p.digits + strings.Repeat("0", p.point-len(p.digits))
	default:
		intPart, fracPart = p.digits[:p.point], p.digits[p.point:]
	}
	var b strings.Builder
	if neg {
		b.WriteString("-")
	}
	b.WriteString(intPart)
	if p.scale > 0 {
		b.WriteString(".")
		b.WriteString(fracPart)
		b.WriteString(strings.Repeat("0", p.scale-len(fracPart)))
	}
	return b.String(), true
}

// plainForm describes a JSON number in the plain decimal form Postgres's
// numeric prints: the value is 0.<digits> × 10^point, with scale digits after the
// point, length bytes in all. asWritten says the number is in that form
// already.
type plainForm struct {
	neg, asWritten       bool
	digits               string
	point, scale, length int
}

// plainFormOf returns the plain form of n, which fitsNumeric accepts,
// without building it.
func plainFormOf(n string) plainForm {
	neg := strings.HasPrefix(n, "-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(strings.TrimPrefix(n, "-")), "e")
	if !hasExp && (!neg || strings.Trim(mant, "0.") != "") {
		return plainForm{asWritten: true, length: len(n)} // JSON has no leading zeros
	}
	whole, frac, _ := strings.Cut(mant, ".")
	e, _ := strconv.Atoi(strings.TrimPrefix(exp, "+")) // fitsNumeric bounds it
	p := plainForm{neg: neg, scale: max(0, len(frac)-e)}
	p.digits = strings.TrimLeft(whole+frac, "0")
	p.point = len(whole) - (len(whole+frac) - len(p.digits)) + e
	p.length = 1 // of the integer part
	if p.digits != "" && p.point > 0 {
		p.length = p.point
	}
	if neg && p.digits != "" {
		p.length++
	}
	if p.scale > 0 {
		p.length += 1 + p.scale
	}
	return p
}

// Limits of a Postgres numeric (src/backend/utils/adt/numeric.c), checked
// against Postgres 15: digits before the decimal point, the display scale
// (digits after the point as written, trailing zeros included, less the
// exponent) and the exponent (Postgres refuses 0e1073741823).
const (
	maxNumericIntDigits = 131072
	maxNumericScale     = 16383
	maxNumericExponent  = math.MaxInt32/2 - 1
)

// fitsNumeric reports whether Postgres accepts the JSON number n as a
// numeric, which jsonb uses for every number. It follows the checks of
// Postgres's numeric input, so that even a zero written as 0e-99999 (whose
// scale is too large) is refused here rather than by the database.
func fitsNumeric(n string) bool {
	mant, exp, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(n, "-")), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	var e int64
	if exp != "" {
		neg := strings.HasPrefix(exp, "-")
		exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(exp) > 10 {
			return false
		}
		e, _ = strconv.ParseInt("0"+exp, 10, 64)
		if e > maxNumericExponent {
			return false
		}
		if neg {
			e = -e
		}
	}
	if int64(len(frac))-e > maxNumericScale {
		return false
	}
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return true // zero has no integer digits
	}
	// The value is 0.<digits> × 10^point.
	point := int64(len(whole)) - int64(len(whole+frac)-len(digits)) + e
	return point <= maxNumericIntDigits
}

// number returns the JSON text of val when val is a number: a json.Number
// (if well formed), a finite float64, an int or an int64.
func number(val any) (string, bool) {
	switch x := val.(type) {
	case json.Number:
		return string(x), isJSONNumber(string(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", false
		}
		if x == math.Trunc(x) && math.Abs(x) < 1e21 {
			// 'g' would write 1234567 as 1.234567e+06, which Int and
			// BigInt refuse for its exponent.
			return strconv.FormatFloat(x, 'f', -1, 64), true
		}
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

// wholeNumber returns the integer literal of the JSON number n when n is a
// whole number written without an exponent, with any fraction all zeros.
func wholeNumber(n string) (string, bool) {
	if strings.ContainsAny(n, "eE") {
		return "", false
	}
	whole, frac, _ := strings.Cut(n, ".")
	if strings.Trim(frac, "0") != "" {
		return "", false
	}
	return whole, true
}

// isJSONNumber reports whether s follows the JSON number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isJSONNumber(s string) bool {
	i := 0
	digits := func() int {
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// shorten cuts a number's text for a message.
func shorten(n string) string {
	if len(n) > 64 {
		return n[:64] + "…"
	}
	return n
}
