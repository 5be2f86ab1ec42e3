package cmd

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/apimachinery/pkg/api/resource"
)

// config merges flags, PODSLO_* environment variables and an optional YAML
// file, in that order of precedence. Every value is parsed strictly, from
// whichever source it comes: a duration needs a unit, a boolean is true or
// false, and a value that does not parse is an error naming the key and its
// source, never a silent default. The getters collect errors; err reports
// them all at once.
type config struct {
	flags *pflag.FlagSet
	// file holds the --config file's values as YAML typed them.
	file map[string]any
	// set holds values the command itself decides, above every source.
	set  map[string]any
	errs []error
}

func bindConfig(cmd *cobra.Command) (*config, error) {
	c := &config{flags: cmd.Flags(), file: map[string]any{}, set: map[string]any{}}
	if path := c.str("config"); path != "" {
		v := viper.New()
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("read --config %q: %w", path, err)
		}
		var unknown []string
		// AllKeys flattens nested maps into dotted keys, which is what
		// web.config.file is.
		for _, k := range v.AllKeys() {
			if k == "config" || c.flags.Lookup(k) == nil {
				unknown = append(unknown, k)
				continue
			}
			c.file[k] = v.Get(k)
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return nil, fmt.Errorf("read --config %q: unknown keys %s (keys are flag names)", path, strings.Join(unknown, ", "))
		}
	}
	return c, nil
}

// envName is the environment variable of a flag.
func envName(key string) string {
	return "PODSLO_" + strings.ToUpper(strings.ReplaceAll(strings.ReplaceAll(key, "-", "_"), ".", "_"))
}

// raw returns key's value as its source gives it, and a description of the
// source for errors. An empty environment variable counts as unset, as in
// viper and in manifests that template optional values.
func (c *config) raw(key string) (val any, source string) {
	if v, ok := c.set[key]; ok {
		return v, "--" + key
	}
	f := c.flags.Lookup(key)
	if f != nil && f.Changed {
		return f.Value.String(), "--" + key
	}
	if v, ok := os.LookupEnv(envName(key)); ok && v != "" {
		return v, envName(key)
	}
	if v, ok := c.file[key]; ok {
		return v, fmt.Sprintf("%q in --config", key)
	}
	if f == nil {
		return "", "--" + key
	}
	return f.DefValue, "--" + key
}

func (c *config) fail(source string, val any, want string) {
	c.errs = append(c.errs, fmt.Errorf("%s: %v is not %s", source, val, want))
}

// err reports every value that did not parse.
func (c *config) err() error { return errors.Join(c.errs...) }

func (c *config) str(key string) string {
	v, source := c.raw(key)
	switch v := v.(type) {
	case string:
		return v
	case int, int64, float64, bool:
		// YAML types a bare 8080 or true; as a string it means the same.
		return fmt.Sprint(v)
	}
	c.fail(source, v, "a string")
	return ""
}

// duration takes what time.ParseDuration takes: "90s", "1h30m", "0". A bare
// number is refused in every source: 3600 is an hour to one reader and
// 3.6 µs to viper.
func (c *config) duration(key string) time.Duration {
	v, source := c.raw(key)
	s, ok := v.(string)
	if !ok {
		c.fail(source, v, `a duration with a unit, such as "90s" or "1h"`)
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		c.fail(source, strconv.Quote(s), `a duration with a unit, such as "90s" or "1h"`)
		return 0
	}
	return d
}

// boolean takes true or false only (and YAML's booleans): "yes", "on" or
// "1" are refused rather than read as false.
func (c *config) boolean(key string) bool {
	v, source := c.raw(key)
	switch v := v.(type) {
	case bool:
		return v
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return true
		case "false":
			return false
		}
		c.fail(source, strconv.Quote(v), "true or false")
		return false
	}
	c.fail(source, v, "true or false")
	return false
}

func (c *config) integer(key string) int {
	v, source := c.raw(key)
	switch v := v.(type) {
	case int:
		return v
	case int64:
		return int(v)
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err == nil {
			return n
		}
		c.fail(source, strconv.Quote(v), "a whole number")
		return 0
	}
	c.fail(source, v, "a whole number")
	return 0
}

// quantity takes a Kubernetes quantity: "64Mi", "1G", "0".
func (c *config) quantity(key string) int64 {
	v, source := c.raw(key)
	s := fmt.Sprint(v)
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		c.fail(source, strconv.Quote(s), `a quantity of bytes, such as "64Mi"`)
		return 0
	}
	return q.Value()
}

// list reads a repeatable flag. From the environment it takes a
// comma-separated list (PODSLO_POD_LABEL=app,team); from the file, a YAML
// list or a comma-separated string.
func (c *config) list(key string) []string {
	var items []string
	f := c.flags.Lookup(key)
	v, source := c.raw(key)
	switch {
	case f != nil && f.Changed:
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			items = sv.GetSlice()
		} else {
			items = []string{f.Value.String()}
		}
	default:
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				s, ok := e.(string)
				if !ok {
					c.fail(source, v, "a list of strings")
					return nil
				}
				items = append(items, s)
			}
		case string:
			if f != nil && v == f.DefValue {
				if sv, ok := f.Value.(pflag.SliceValue); ok {
					items = sv.GetSlice()
					break
				}
			}
			items = []string{v}
		default:
			c.fail(source, v, "a list of strings")
			return nil
		}
	}
	var out []string
	for _, s := range items {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}
