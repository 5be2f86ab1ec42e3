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
// file, in that order of precedence. Each component binds its flags to the
// fields of its Options (AddFlags); bindConfig then gives every flag the
// command line left alone its value from the environment or, failing that,
// the file, through the flag itself, so that it lands in the bound field.
// Every value is parsed strictly, from whichever source it comes: a
// duration needs a unit, a boolean is true or false, and a value that does
// not parse is an error naming the key and its source, never a silent
// default. err reports them all at once.
type config struct {
	flags *pflag.FlagSet
	errs  []error
}

// bindConfig reads the --config file and sets the flags from it and from
// the environment. An unreadable file or an unknown key stops it at once;
// the values that do not parse wait in err.
func bindConfig(cmd *cobra.Command) (*config, error) {
	c := &config{flags: cmd.Flags()}
	file, err := c.readFile()
	if err != nil {
		return nil, err
	}
	// In the order the flags were defined, which is the order of the
	// Options fields, so that errors come in a stable, readable order.
	sorted := c.flags.SortFlags
	c.flags.SortFlags = false
	defer func() { c.flags.SortFlags = sorted }()
	c.flags.VisitAll(func(f *pflag.Flag) {
		switch {
		case f.Name == "config" || f.Name == "help":
		case f.Changed:
			// A repeatable flag takes comma-separated values as well, as
			// in the environment and the file.
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				c.replace(f, sv.GetSlice(), "--"+f.Name)
			}
		default:
			if v, source, ok := c.lookup(f.Name, file); ok {
				c.set(f, v, source)
			}
		}
	})
	return c, nil
}

// readFile reads --config (or PODSLO_CONFIG), keyed by flag name, with
// its values as YAML typed them.
func (c *config) readFile() (map[string]any, error) {
	path := ""
	if f := c.flags.Lookup("config"); f != nil && f.Changed {
		path = f.Value.String()
	} else if v := os.Getenv(envName("config")); v != "" {
		path = v
	}
	file := map[string]any{}
	if path == "" {
		return file, nil
	}
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
		file[k] = v.Get(k)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("read --config %q: unknown keys %s (keys are flag names)", path, strings.Join(unknown, ", "))
	}
	return file, nil
}

// envName is the environment variable of a flag.
func envName(key string) string {
	return "PODSLO_" + strings.ToUpper(strings.ReplaceAll(strings.ReplaceAll(key, "-", "_"), ".", "_"))
}

// lookup returns key's value from the environment or the file, as its
// source gives it, and a description of the source for errors. An empty
// environment variable counts as unset, as in viper and in manifests that
// template optional values.
func (c *config) lookup(key string, file map[string]any) (val any, source string, ok bool) {
	if v, ok := os.LookupEnv(envName(key)); ok && v != "" {
		return v, envName(key), true
	}
	if v, ok := file[key]; ok {
		return v, fmt.Sprintf("%q in --config", key), true
	}
	return nil, "", false
}

// set parses v strictly as f's type wants it and sets f to it.
func (c *config) set(f *pflag.Flag, v any, source string) {
	var (
		s  string
		ok bool
	)
	switch f.Value.Type() {
	case "duration":
		var d time.Duration
		if d, ok = c.duration(v, source); ok {
			s = d.String()
		}
	case "bool":
		var b bool
		if b, ok = c.boolean(v, source); ok {
			s = strconv.FormatBool(b)
		}
	case "int":
		var n int
		if n, ok = c.integer(v, source); ok {
			s = strconv.Itoa(n)
		}
	case "quantity":
		s, ok = c.quantity(v, source)
	case "stringArray", "stringSlice":
		if items, ok := c.list(v, source); ok {
			c.replace(f, items, source)
		}
		return
	default:
		s, ok = c.str(v, source)
	}
	if !ok {
		return
	}
	if err := c.flags.Set(f.Name, s); err != nil {
		c.errs = append(c.errs, fmt.Errorf("%s: %w", source, err))
	}
}

// replace sets a repeatable flag to items, each split at commas, trimmed,
// empty ones dropped.
func (c *config) replace(f *pflag.Flag, items []string, source string) {
	out := []string{}
	for _, s := range items {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	if err := f.Value.(pflag.SliceValue).Replace(out); err != nil {
		c.errs = append(c.errs, fmt.Errorf("%s: %w", source, err))
	}
}

func (c *config) fail(source string, val any, want string) {
	c.errs = append(c.errs, fmt.Errorf("%s: %v is not %s", source, val, want))
}

// err reports every value that did not parse.
func (c *config) err() error { return errors.Join(c.errs...) }

func (c *config) str(v any, source string) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case int, int64, float64, bool:
		// YAML types a bare 8080 or true; as a string it means the same.
		return fmt.Sprint(v), true
	}
	c.fail(source, v, "a string")
	return "", false
}

// duration takes what time.ParseDuration takes: "90s", "1h30m", "0". A bare
// number is refused in every source: 3600 is an hour to one reader and
// 3.6 µs to viper.
func (c *config) duration(v any, source string) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		c.fail(source, v, `a duration with a unit, such as "90s" or "1h"`)
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		c.fail(source, strconv.Quote(s), `a duration with a unit, such as "90s" or "1h"`)
		return 0, false
	}
	return d, true
}

// boolean takes true or false only (and YAML's booleans): "yes", "on" or
// "1" are refused rather than read as false.
func (c *config) boolean(v any, source string) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		c.fail(source, strconv.Quote(v), "true or false")
		return false, false
	}
	c.fail(source, v, "true or false")
	return false, false
}

func (c *config) integer(v any, source string) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int64:
		return int(v), true
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err == nil {
			return n, true
		}
		c.fail(source, strconv.Quote(v), "a whole number")
		return 0, false
	}
	c.fail(source, v, "a whole number")
	return 0, false
}

// quantity takes a Kubernetes quantity: "64Mi", "1G", "0".
func (c *config) quantity(v any, source string) (string, bool) {
	s := strings.TrimSpace(fmt.Sprint(v))
	if _, err := resource.ParseQuantity(s); err != nil {
		c.fail(source, strconv.Quote(fmt.Sprint(v)), `a quantity of bytes, such as "64Mi"`)
		return "", false
	}
	return s, true
}

// list reads a repeatable flag's value. From the environment it takes a
// comma-separated list (PODSLO_POD_LABEL=app,team); from the file, a YAML
// list or a comma-separated string.
func (c *config) list(v any, source string) ([]string, bool) {
	switch v := v.(type) {
	case []any:
		items := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				c.fail(source, v, "a list of strings")
				return nil, false
			}
			items = append(items, s)
		}
		return items, true
	case string:
		return []string{v}, true
	}
	c.fail(source, v, "a list of strings")
	return nil, false
}
