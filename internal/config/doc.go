// Package config loads the daemon's settings into a typed Config.
//
// It is the only package that imports viper. A value comes from the first of
// these that sets it:
//
//  1. a command-line flag the user gave explicitly (--data-dir),
//  2. an environment variable named SLUICE_ plus the upper-case key
//     (SLUICE_DATA_DIR); an empty variable counts as unset,
//  3. the config file named by --config or SLUICE_CONFIG (YAML, TOML or
//     JSON, chosen by the file's extension), using the key itself
//     (data_dir),
//  4. the built-in default.
//
// Load rejects unknown keys in the config file and values that do not parse
// or are out of range, with an error naming the key, the value and where the
// value came from. The environment is read through a lookup function so
// that tests never touch the process environment. Reference renders the
// user's table of keys, docs/configuration.md; a test keeps the committed
// page in step with the code.
package config
