// Package jsonesc finds the \u escapes in JSON text that name half of a
// UTF-16 surrogate pair without the other half ("\ud800" alone, or
// followed by anything but "\udc00" to "\udfff"). Such an escape names no
// character: encoding/json, and gqlparser for GraphQL strings, read it as
// U+FFFD and go on, so a client's text would be stored other than it was
// sent, silently. Sluice refuses it instead, as it refuses text that is not
// UTF-8.
//
// The scanner treats every backslash as the start of an escape: in JSON a
// backslash appears only inside strings, so on valid JSON it is exact, and
// on invalid JSON whatever it says is beside the point (the decoder
// refuses the text anyway). It jumps from backslash to backslash, so text
// without escapes costs about what bytes.IndexByte does.
package jsonesc

import (
	"bytes"
	"fmt"
)

// Lone is a lone half of a surrogate pair: where its escape starts (the
// offset of its backslash) and the half it names.
type Lone struct {
	Offset int64
	Half   rune
}

// Escape returns the escape as it was written, in lower case: \ud800.
func (l Lone) Escape() string { return fmt.Sprintf(`\u%04x`, l.Half) }

// Refusal says what is wrong with the escape, for an error that names the
// text it is in: "the escape \ud800 at byte 35 (counting from 0) is half
// of a UTF-16 surrogate pair …".
func (l Lone) Refusal() string {
	return fmt.Sprintf("the escape %s at byte %d (counting from 0) is half of a UTF-16 surrogate pair without its other half: it names no character, and is refused, not replaced", l.Escape(), l.Offset)
}

// Scanner checks a stream of JSON text, given in pieces in order. The zero
// Scanner is ready for the start of a stream.
type Scanner struct {
	state state
	off   int64 // offset in the stream of the next byte
	esc   int64 // offset of the backslash of the escape being read
	high  Lone  // the high half read last
	n     int   // hex digits read of the current \u escape
	v     rune  // their value so far
	bad   Lone  // the lone half found, once found
	found bool
}

type state uint8

const (
	idle     state = iota // outside an escape
	escaped               // after a backslash
	hex                   // reading the 4 digits of a \u escape
	wantLow               // after a high half: its low half must follow
	wantLowU              // after a high half and a backslash
	lowHex                // reading the digits of the low half
)

// Write scans the next piece p of the stream. It returns the first lone
// half, and true, once one is found (and keeps returning them); false
// otherwise.
func (s *Scanner) Write(p []byte) (Lone, bool) {
	if s.found {
		return s.bad, true
	}
	for i := 0; i < len(p); {
		if s.state == idle {
			j := bytes.IndexByte(p[i:], '\\')
			if j < 0 {
				s.off += int64(len(p) - i)
				return Lone{}, false
			}
			i += j
			s.off += int64(j)
			s.esc, s.state = s.off, escaped
			i++
			s.off++
			continue
		}
		c := p[i]
		switch s.state {
		case escaped:
			if c == 'u' {
				s.state, s.n, s.v = hex, 0, 0
			} else {
				s.state = idle // \" \\ \/ \b \f \n \r \t (or invalid JSON)
			}
		case wantLow:
			if c != '\\' {
				return s.fail(s.high)
			}
			s.state = wantLowU
		case wantLowU:
			if c != 'u' {
				return s.fail(s.high)
			}
			s.state, s.n, s.v = lowHex, 0, 0
		case hex, lowHex:
			d, ok := hexDigit(c)
			if !ok {
				if s.state == lowHex {
					return s.fail(s.high)
				}
				s.state = idle // invalid JSON: the decoder says so
				continue       // c may start an escape itself
			}
			s.v = s.v<<4 | d
			if s.n++; s.n < 4 {
				break
			}
			isHigh := 0xD800 <= s.v && s.v < 0xDC00
			isLow := 0xDC00 <= s.v && s.v < 0xE000
			switch {
			case s.state == lowHex && !isLow:
				return s.fail(s.high)
			case s.state == lowHex:
				s.state = idle // a pair: one character
			case isLow:
				return s.fail(Lone{s.esc, s.v})
			case isHigh:
				s.high, s.state = Lone{s.esc, s.v}, wantLow
			default:
				s.state = idle
			}
		}
		i++
		s.off++
	}
	return Lone{}, false
}

// End says the stream ended; it returns what Write would, counting a high
// half at the very end as lone.
func (s *Scanner) End() (Lone, bool) {
	if s.found {
		return s.bad, true
	}
	if s.state == wantLow || s.state == wantLowU || s.state == lowHex {
		return s.fail(s.high)
	}
	return Lone{}, false
}

func (s *Scanner) fail(l Lone) (Lone, bool) {
	s.bad, s.found = l, true
	return l, true
}

// Find returns the first lone half of a surrogate pair in b, and true; or
// false when there is none.
func Find(b []byte) (Lone, bool) {
	var s Scanner
	if l, bad := s.Write(b); bad {
		return l, true
	}
	return s.End()
}

func hexDigit(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10), true
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}
