package doctest_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// A block is a fenced ```sh code block of a Markdown file that calls curl.
type block struct {
	line int // of the opening fence, counting from 1
	text string
}

// shellBlocks returns the ```sh blocks of a Markdown document that call
// curl, in document order. Other blocks (make, docker, sluice serve, other
// languages) are not examples to run.
func shellBlocks(doc string) ([]block, error) {
	var blocks []block
	var cur *block
	var body strings.Builder
	for i, line := range strings.Split(doc, "\n") {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		switch {
		case cur == nil && fence:
			cur = &block{line: i + 1}
			if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "```")) != "sh" {
				cur.line = -cur.line // a block of another language: skipped
			}
			body.Reset()
		case cur != nil && fence:
			if cur.line > 0 && strings.Contains(body.String(), "curl") {
				cur.text = body.String()
				blocks = append(blocks, *cur)
			}
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: a code block that never ends", abs(cur.line))
	}
	return blocks, nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// A command is one logical line of a shell block: a command with its
// continuation lines (a trailing backslash, |, && or ||, or a newline
// inside quotes), and its trailing comment.
type command struct {
	line    int    // in the block, counting from 0
	start   int    // byte offset in the block's text
	word    string // the first word
	text    string // without the comment
	comment string // the trailing comment, without #
}

// commands splits a shell block into logical lines. It knows quotes,
// backslashes and comments, which is all the docs' examples use.
func commands(text string) []command {
	var out []command
	start, line, startLine := 0, 0, 0
	commentAt := -1
	inSingle, inDouble := false, false
	flush := func(end int) {
		c := command{line: startLine, start: start}
		if commentAt >= 0 {
			c.text, c.comment = text[start:commentAt], strings.TrimSpace(text[commentAt+1:end])
		} else {
			c.text = text[start:end]
		}
		if f := strings.Fields(c.text); len(f) > 0 {
			c.word = f[0]
		}
		if strings.TrimSpace(c.text) != "" || c.comment != "" {
			out = append(out, c)
		}
		start, startLine, commentAt = end+1, line+1, -1
	}
	for i := 0; i < len(text); i++ {
		ch := text[i]
		switch {
		case commentAt >= 0:
			if ch == '\n' {
				flush(i)
				line++
			}
		case inSingle:
			if ch == '\'' {
				inSingle = false
			}
			if ch == '\n' {
				line++
			}
		case inDouble:
			switch ch {
			case '\\':
				i++
			case '"':
				inDouble = false
			case '\n':
				line++
			}
		default:
			switch ch {
			case '\'':
				inSingle = true
			case '"':
				inDouble = true
			case '\\':
				if i+1 < len(text) && text[i+1] == '\n' {
					line++
				}
				i++
			case '#':
				if i == start || strings.ContainsRune(" \t", rune(text[i-1])) {
					commentAt = i
				}
			case '\n':
				if t := strings.TrimRight(text[start:i], " \t"); strings.HasSuffix(t, "|") || strings.HasSuffix(t, "&&") {
					line++ // the pipeline or list goes on
					continue
				}
				flush(i)
				line++
			}
		}
	}
	if start < len(text) {
		flush(len(text))
	}
	return out
}

// What a command's trailing comment may ask of it: "answers 401" (the HTTP
// status it must answer; without it, curl must succeed), and `prints
// "a" "b"` (strings its output must contain; for a stream, by the end of
// the document).
var (
	answersRE = regexp.MustCompile(`\banswers (\d{3})\b`)
	printsRE  = regexp.MustCompile(`\bprints ((?:"[^"]*"(?:,? (?:and )?)?)+)`)
	quotedRE  = regexp.MustCompile(`"([^"]*)"`)
	streamRE  = regexp.MustCompile(`(?:^|\s)-N(?:\s|$)`)
)

// expectation is what a command's comment asks of it.
type expectation struct {
	status string   // "": any 2xx
	prints []string // substrings of its output
	stream bool     // curl -N: runs until stopped
}

func expect(c command) (expectation, error) {
	var e expectation
	if m := answersRE.FindStringSubmatch(c.comment); m != nil {
		e.status = m[1]
	}
	if m := printsRE.FindStringSubmatch(c.comment); m != nil {
		for _, q := range quotedRE.FindAllStringSubmatch(m[1], -1) {
			e.prints = append(e.prints, q[1])
		}
	}
	e.stream = c.word == "curl" && streamRE.MatchString(c.text)
	if (e.status != "" || e.prints != nil) && c.word != "curl" {
		return e, fmt.Errorf("line %d: only a command that starts with curl can say what it answers or prints", c.line+1)
	}
	if e.stream && e.prints == nil {
		return e, fmt.Errorf(`line %d: a stream (curl -N) must say what it prints by the end, e.g. # prints "Person/alice"`, c.line+1)
	}
	if e.stream && e.status != "" {
		return e, fmt.Errorf("line %d: a stream cannot say what it answers", c.line+1)
	}
	return e, nil
}

func TestShellBlocks(t *testing.T) {
	t.Parallel()
	doc := "# T\n\n```sh\nmake run\n```\n\n```sh\ncurl -u a:b x # one\n```\n\n```js\ncurl()\n```\n```sh\n  curl y\n```\n"
	got, err := shellBlocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].line != 7 || got[0].text != "curl -u a:b x # one\n" || got[1].line != 14 {
		t.Errorf("shellBlocks = %+v", got)
	}
	if _, err := shellBlocks("```sh\ncurl x\n"); err == nil {
		t.Error("an unterminated block is no error")
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	text := `# a comment line
curl -u admin:root -X POST localhost:6363/x \
  -d '{"a":"#not a comment",
       "b":1}'   # answers 201
printf '%s\n' a b |
  curl --data-binary @- y
x=$(curl -s "q#r" | sed -n 's/a/b/p') # prints "no"
curl -N z  # prints "Person/alice" and "Person/bob"
`
	got := commands(text)
	want := []struct {
		line    int
		word    string
		comment string
	}{
		{0, "", "a comment line"},
		{1, "curl", "answers 201"},
		{4, "printf", ""},
		{6, "x=$(curl", `prints "no"`},
		{7, "curl", `prints "Person/alice" and "Person/bob"`},
	}
	if len(got) != len(want) {
		t.Fatalf("commands = %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].line != w.line || got[i].word != w.word || got[i].comment != w.comment {
			t.Errorf("command %d = %+v, want %+v", i, got[i], w)
		}
	}
	if e, err := expect(got[1]); err != nil || e.status != "201" || e.stream {
		t.Errorf("expect(%q) = %+v, %v", got[1].text, e, err)
	}
	if _, err := expect(got[3]); err == nil {
		t.Error("an expectation on a command that does not start with curl is no error")
	}
	if e, err := expect(got[4]); err != nil || !e.stream || strings.Join(e.prints, "|") != "Person/alice|Person/bob" {
		t.Errorf("expect(%q) = %+v, %v", got[4].text, e, err)
	}
	if _, err := expect(command{word: "curl", text: "curl -N x"}); err == nil {
		t.Error("a stream that says nothing of what it prints is no error")
	}
}
