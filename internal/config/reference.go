package config

import (
	"fmt"
	"strings"
)

// Reference returns docs/configuration.md, the user's table of every key,
// rendered from options() so that the page cannot drift from the code.
// `make generate` writes it (internal/config/gendoc) and `make verify`
// fails when the committed page differs.
func Reference() string {
	var b strings.Builder
	b.WriteString(`<!-- Generated from internal/config/options.go by ` + "`make generate`" + `; do not edit. -->
# Configuration

Every setting can be given as a flag, as an environment variable, or as a
key in a config file named by ` + "`--config` or `SLUICE_CONFIG`" + ` (YAML, TOML or JSON,
chosen by the file's extension). A flag you give beats the environment, which
beats the file, which beats the default. An empty environment variable counts
as unset; a ` + "`SLUICE_`" + ` variable that names no setting is warned about
(` + "`ignoring unknown environment variable`" + `, by ` + "`serve`, `migrate` and `healthcheck`" + `) and
otherwise ignored. An unknown key in the file or an invalid value stops Sluice with an
error naming the key and its value, but no secret: it shows the length only of
` + keys(whole) + `, and all but the password of
` + keys(password) + ` (a ` + "`database_url`" + ` Postgres's driver cannot
parse is not shown at all: only what is wrong with it). Durations use Go syntax: ` + "`90s`, `15m`, `1h30m`" + `, up to
` + "`2562047h47m16.854775807s`" + ` (about 292 years; a longer one is refused as too long).
A flag takes the same values as its environment variable, and a wrong one is
refused the same way, naming the flag (` + "`--max-body-bytes 10MB`" + ` is refused with
` + "`config: max_body_bytes: invalid value \"10MB\" (from --max-body-bytes): want a whole number of bytes greater than zero`" + `).
Sizes and counts are decimal digits without a sign or a leading zero, in a
config file as in a variable or a flag: ` + "`0x10`, `010`, `1_000`, `+16`, `1e3` and `16.0`" + ` are
refused, though YAML, TOML or JSON would read them as numbers (YAML reads
` + "`010`" + ` as 8), and the error shows the number as the file writes it
(` + "`config: max_body_bytes: invalid value 0x10 (from config file \"sluice.yaml\"): want a whole number of bytes greater than zero`" + `). A true/false
setting is ` + "`true`" + ` or ` + "`false`" + ` (its flag alone means true).

| Key | Environment | Flag | Default | Meaning |
|-----|-------------|------|---------|---------|
`)
	for _, o := range options() {
		def := "`" + o.def + "`"
		if o.def == "" {
			def = "empty"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | `--%s` | %s | %s |\n", o.key, o.env(), o.flag(), def, markdownEscape(o.usage))
	}
	b.WriteString("\nFor example, `sluice.yaml`:\n\n```yaml\n" + `listen: ":8080"
database_url: "postgres://sluice@db.internal/sluice"
log_format: json
log_retention: 720h
` + "```\n" + `
The Go runtime's own variables (` + "`GOGC`, `GOMEMLIMIT`, `GOMAXPROCS`" + `) work as
for any Go program; when ` + "`GOGC`" + ` is unset, Sluice raises the collector's
target during large writes (see [How writes work](ARCHITECTURE.md#how-writes-work)).
`)
	return b.String()
}

// keys lists, in words, the keys of the options whose secrecy is s.
func keys(s secrecy) string {
	var ks []string
	for _, o := range options() {
		if o.secret == s {
			ks = append(ks, "`"+o.key+"`")
		}
	}
	if len(ks) < 2 {
		return strings.Join(ks, "")
	}
	return strings.Join(ks[:len(ks)-1], ", ") + " and " + ks[len(ks)-1]
}

func markdownEscape(s string) string {
	return strings.NewReplacer("*", `\*`, "<", "&lt;", ">", "&gt;", "|", `\|`).Replace(s)
}
