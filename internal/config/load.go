package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

const (
	configFlag = "config"
	configEnv  = "SLUICE_CONFIG"
)

// RegisterFlags adds --config and one flag per key to fs. Flag defaults are
// the keys' defaults, for --help; Load only uses a flag the user set.
//
// A flag holds its value as written, and Load decodes it as it decodes
// the same value from the environment: pflag's own parsing answered
// `invalid argument "10MB" for "--max-body-bytes" flag: strconv.ParseInt:
// …` where the environment's said what is wanted, and accepted values the
// environment does not (0x10, 1_000, a boolean of 1 or T).
func RegisterFlags(fs *pflag.FlagSet) {
	fs.String(configFlag, "", "config file: YAML, TOML or JSON, chosen by extension (env "+configEnv+")")
	for _, o := range options() {
		usage := o.usage + " (env " + o.env() + ")"
		f := fs.VarPF(&flagValue{s: o.def, kind: o.kind}, o.flag(), "", usage)
		if o.kind == kindBool {
			f.NoOptDefVal = "true" // --jwt-jwks-http-loopback alone
		}
	}
}

// flagValue is a flag's value as written on the command line.
type flagValue struct {
	s    string
	kind kind
}

func (v *flagValue) String() string     { return v.s }
func (v *flagValue) Set(s string) error { v.s = s; return nil }

// Type names the value in --help.
func (v *flagValue) Type() string {
	switch v.kind {
	case kindDuration:
		return "duration"
	case kindInt64:
		return "int"
	case kindBool:
		return "bool"
	}
	return "string"
}

// Load returns the configuration from fs (flags the user set explicitly),
// the environment as seen through lookupEnv (SLUICE_* variables), the
// config file named by --config or SLUICE_CONFIG, and the defaults, in that
// order of precedence. fs may be nil, or lack some of the flags
// RegisterFlags adds; lookupEnv may be nil. Pass os.LookupEnv in main.
//
// The error names every key whose value is invalid, with the value (a
// secret's length only, a connection string's without its password) and
// where it came from. An unreadable or unparsable config file, one with an unknown
// key or an empty value, or one whose extension is not .yaml, .yml, .toml or
// .json is an error too.
func Load(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) (Config, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	opts := options()
	v := viper.New()

	path := configPath(fs, lookupEnv)
	var fileKeys []string
	var numbers map[string]fileNumber
	if path != "" {
		var err error
		if numbers, err = readFile(v, path, opts); err != nil {
			return Config{}, err
		}
		fileKeys = v.AllKeys()
	}

	envSet := map[string]any{}
	for _, o := range opts {
		v.SetDefault(o.key, o.def)
		// Set, not BindPFlag: viper would convert an int or bool flag
		// itself, "10MB" to 0. Set is above every other layer.
		if f := lookupFlag(fs, o.flag()); f != nil && f.Changed {
			v.Set(o.key, f.Value.String())
		}
		// Empty counts as unset, as in viper, so that a compose file's
		// SLUICE_X=${X} with X undefined keeps the lower layers.
		if s, ok := lookupEnv(o.env()); ok && s != "" {
			envSet[o.key] = s
		}
	}
	// Viper reads env only through os.LookupEnv; merging over the file's
	// values gives env the same precedence: above the file, below flags.
	if err := v.MergeConfigMap(envSet); err != nil {
		return Config{}, fmt.Errorf("config: merge environment: %w", err)
	}

	var c Config
	var errs []error
	for _, o := range opts {
		raw := v.Get(o.key)
		var from string
		if f := lookupFlag(fs, o.flag()); f != nil && f.Changed {
			from = "--" + o.flag()
		} else if envSet[o.key] != nil {
			from = o.env()
		} else if slices.Contains(fileKeys, o.key) {
			from = fmt.Sprintf("config file %q", path)
			if n, ok := numbers[o.key]; ok {
				raw = n // checked as written, as a variable is
			}
		} else {
			from = "default"
		}
		if err := o.decode(&c, raw); err != nil {
			errs = append(errs, fmt.Errorf("config: %s: invalid value %s (from %s): %w", o.key, o.shown(raw), from, err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, checkJWTClaims(c))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// checkJWTClaims refuses jwt_issuer and jwt_audience without a key to
// verify JWTs with: every JWT is refused then, and the operator who set
// them believes JWTs are checked against them.
func checkJWTClaims(c Config) error {
	if c.JWTHS256Secret != "" || c.JWTHS256SecretFile != "" || c.JWTJWKSFile != "" || c.JWTJWKSURL != "" {
		return nil
	}
	var set []string
	if c.JWTIssuer != "" {
		set = append(set, "jwt_issuer")
	}
	if c.JWTAudience != "" {
		set = append(set, "jwt_audience")
	}
	switch len(set) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("config: %s is set but no JWT key is, so no JWT is accepted: set jwt_hs256_secret, jwt_hs256_secret_file, jwt_jwks_file or jwt_jwks_url, or unset %[1]s", set[0])
	}
	return errors.New("config: jwt_issuer and jwt_audience are set but no JWT key is, so no JWT is accepted: set jwt_hs256_secret, jwt_hs256_secret_file, jwt_jwks_file or jwt_jwks_url, or unset them")
}

func lookupFlag(fs *pflag.FlagSet, name string) *pflag.Flag {
	if fs == nil {
		return nil
	}
	return fs.Lookup(name)
}

func configPath(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) string {
	if f := lookupFlag(fs, configFlag); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	path, _ := lookupEnv(configEnv)
	return path
}

// readFile loads path into v, which must be otherwise empty, and checks that
// it holds only known keys, each with a value. It returns the file's
// numbers as written (fileNumbers).
func readFile(v *viper.Viper, path string, opts []option) (map[string]fileNumber, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	switch ext {
	case "yaml", "yml", "toml", "json":
	default:
		return nil, fmt.Errorf("config: config file %q: unsupported extension %q (want .yaml, .yml, .toml or .json)", path, filepath.Ext(path))
	}
	// Read once, for viper and for fileNumbers alike.
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: read config file %q: %w", path, err)
	}
	v.SetConfigType(ext)
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("config: read config file %q: %w", path, err)
	}
	numbers, err := fileNumbers(ext, data)
	if err != nil {
		return nil, fmt.Errorf("config: read config file %q: %w", path, err)
	}

	known := make([]string, len(opts))
	for i, o := range opts {
		known[i] = o.key
	}
	// Before defaults and flags are added, AllKeys holds exactly the file's
	// keys, lower-cased, nested ones joined with ".".
	keys := v.AllKeys()
	slices.Sort(keys)
	var unknown []string
	var errs []error
	for _, k := range keys {
		switch {
		case !slices.Contains(known, k):
			unknown = append(unknown, strconv.Quote(k))
		case v.Get(k) == nil:
			errs = append(errs, fmt.Errorf("config: config file %q: %s has no value; remove it to use the default", path, k))
		}
	}
	if len(unknown) == 1 {
		errs = append(errs, fmt.Errorf("config: config file %q: unknown key %s; known keys are %s", path, unknown[0], strings.Join(known, ", ")))
	} else if len(unknown) > 1 {
		errs = append(errs, fmt.Errorf("config: config file %q: unknown keys %s; known keys are %s", path, strings.Join(unknown, ", "), strings.Join(known, ", ")))
	}
	return numbers, errors.Join(errs...)
}

func show(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// UnknownEnv returns the sorted names of variables in environ (as from
// os.Environ) that start with SLUICE_ but name no key, so that main can warn
// about a misspelt SLUICE_DATABSE_URL. It skips SLUICE_CONFIG, the test
// harness's SLUICE_TEST_*, and the SLUICE_SERVICE_* and SLUICE_PORT*
// variables Kubernetes injects for a Service named "sluice", which is also
// why they are reported rather than refused.
func UnknownEnv(environ []string) []string {
	known := map[string]bool{configEnv: true}
	for _, o := range options() {
		known[o.env()] = true
	}
	var names []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case !strings.HasPrefix(name, "SLUICE_"), known[name],
			strings.HasPrefix(name, "SLUICE_TEST_"),
			strings.HasPrefix(name, "SLUICE_SERVICE_"),
			strings.HasPrefix(name, "SLUICE_PORT_"),
			name == "SLUICE_PORT" && strings.Contains(value, "://"):
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
