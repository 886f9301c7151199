package rest

import (
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
)

// Every request body Sluice reads is JSON (or, for a schema, SDL text), and
// both are UTF-8. encoding/json would replace each invalid byte in a string
// by U+FFFD and go on, so a client's text would be stored other than it
// was sent, silently: the body is checked as it is read instead, and a
// body that is not valid UTF-8 fails with a 400 naming the byte where it
// stops being UTF-8. A write fails whole, nothing of it written (its
// transaction rolls back).

// utf8Check checks a stream of bytes, read in chunks, for valid UTF-8.
// A character split between two chunks is checked once the second comes.
type utf8Check struct {
	// pending holds the start of a character whose remaining bytes are
	// in the next chunk.
	pending [utf8.UTFMax]byte
	np      int
	// off is the offset in the stream of pending[0], or of the next
	// chunk when nothing is pending.
	off int64
}

// write checks the next chunk p of the stream.
func (c *utf8Check) write(p []byte) error {
	if c.np > 0 {
		i := 0
		for i < len(p) && !utf8.FullRune(c.pending[:c.np]) {
			c.pending[c.np] = p[i]
			c.np++
			i++
		}
		if !utf8.FullRune(c.pending[:c.np]) {
			return nil // p was all of it: the character is not complete yet
		}
		if r, size := utf8.DecodeRune(c.pending[:c.np]); r == utf8.RuneError && size <= 1 {
			return c.invalid(c.off)
		}
		// FullRune held first with the last byte added: the character
		// is all of pending.
		c.off += int64(c.np)
		c.np = 0
		p = p[i:]
	}
	tail := incompleteTail(p)
	whole := p[:len(p)-tail]
	if !utf8.Valid(whole) {
		return c.invalid(c.off + int64(firstInvalid(whole)))
	}
	c.off += int64(len(whole))
	c.np = copy(c.pending[:], p[len(whole):])
	return nil
}

// end checks that the stream did not end inside a character.
func (c *utf8Check) end() error {
	if c.np > 0 {
		return c.invalid(c.off)
	}
	return nil
}

func (c *utf8Check) invalid(off int64) error {
	return sluice.Errorf(sluice.CodeInvalid, "the request body is not valid UTF-8 at byte %d (counting from 0): request bodies are UTF-8 text, and what is not is refused, not replaced", off)
}

// incompleteTail returns how many bytes at the end of p are the start of
// a character that p does not hold all of (0 to 3).
func incompleteTail(p []byte) int {
	for n := 1; n < utf8.UTFMax && n <= len(p); n++ {
		b := p[len(p)-n]
		if utf8.RuneStart(b) {
			if b >= utf8.RuneSelf && !utf8.FullRune(p[len(p)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}

// firstInvalid returns the offset of the first byte of p that is not part
// of a valid UTF-8 character, or len(p).
func firstInvalid(p []byte) int {
	for i := 0; i < len(p); {
		if p[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(p)
}
