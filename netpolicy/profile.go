package netpolicy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v2"
)

// Profile says what a network plugin knows of NetworkPolicy: what podslo
// needs to judge KEP-2136's "Supported" and "Enforcing" conditions for it.
type Profile struct {
	// Name names the plugin in condition messages.
	Name string
	// MaxVersion is the newest NetworkPolicy version the plugin knows.
	MaxVersion Version
	// Unimplemented are features the plugin knows but does not implement.
	Unimplemented Features
	// Enforcing is what the plugin can say about enforcement: Unknown, or
	// False for a plugin that enforces no NetworkPolicy at all.
	Enforcing Status
}

// ErrProfile marks every error of a profile's content.
var ErrProfile = errors.New("invalid network plugin profile")

// LoadProfile reads and parses a profile file.
func LoadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read network plugin profile: %w", err)
	}
	p, err := ParseProfile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func (p *Profile) parseMaxVersion(value any) []error {
	s, ok := value.(string)
	if !ok {
		// Unquoted, YAML reads 1.10 as the number 1.1.
		return []error{fmt.Errorf(`maxVersion: %v is not a quoted version: write it as a string, such as "1.8" (unquoted, YAML reads 1.10 as the number 1.1)`, value)}
	}
	v, err := ParseVersion(s)
	if err != nil {
		return []error{fmt.Errorf("maxVersion: %w", err)}
	}
	p.MaxVersion = v
	return nil
}

func (p *Profile) parseUnimplemented(value any) []error {
	list, ok := value.([]any)
	if !ok && value != nil {
		return []error{fmt.Errorf("unimplemented: %v is not a list of feature names, such as [egress, sctp]", value)}
	}
	var errs []error
	for _, item := range list {
		name, _ := item.(string)
		row, ok := FeatureByName(name)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("unimplemented: unknown feature %q; the features are %s", fmt.Sprint(item), strings.Join(FeatureNames(), ", ")))
		case p.Unimplemented.Has(row.Feature):
			errs = append(errs, fmt.Errorf("unimplemented: %q listed twice", name))
		case p.MaxVersion != 0 && row.Version > p.MaxVersion:
			errs = append(errs, fmt.Errorf("unimplemented: %s (%s) is newer than maxVersion %s: a plugin cannot know it without implementing it, and maxVersion already rules it out", name, row.Version, p.MaxVersion))
		default:
			p.Unimplemented.add(row.Feature)
		}
	}
	return errs
}

func (p *Profile) parseEnforcing(value any) []error {
	s := Status(fmt.Sprint(value))
	if b, ok := value.(bool); ok {
		// Unquoted, YAML reads True and False as booleans.
		s = map[bool]Status{true: StatusTrue, false: StatusFalse}[b]
	}
	switch s {
	case StatusUnknown, StatusFalse:
		p.Enforcing = s
		return nil
	case StatusTrue:
		return []error{errors.New(`enforcing: "True" cannot come from a profile: KEP-2136's True means the plugin saw this policy fully in effect, which only the plugin can tell, per policy; use Unknown, or False for a plugin that enforces no NetworkPolicy`)}
	}
	return []error{fmt.Errorf("enforcing: %q is not Unknown or False", fmt.Sprint(value))}
}

// ParseProfile parses a profile strictly: an unknown or repeated key, a
// missing name or maxVersion, and a bad value are errors naming the key.
// Every error wraps ErrProfile.
func ParseProfile(data []byte) (*Profile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: empty; want at least name and maxVersion", ErrProfile)
	}
	// A MapSlice rather than a struct, so that every error names its key:
	// yaml's own type errors name only a line.
	var top any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProfile, err)
	}
	if _, ok := top.(map[any]any); !ok {
		// A MapSlice would take a list of one-key maps as its items.
		return nil, fmt.Errorf("%w: not a mapping of name, maxVersion, unimplemented and enforcing", ErrProfile)
	}
	var doc yaml.MapSlice
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProfile, err)
	}
	var errs []error
	p := &Profile{Enforcing: StatusUnknown}
	seen := map[string]bool{}
	for _, item := range doc {
		key, _ := item.Key.(string)
		if seen[key] {
			errs = append(errs, fmt.Errorf("%s: set twice", key))
			continue
		}
		seen[key] = true
		switch key {
		case "name":
			if s, ok := item.Value.(string); ok && strings.TrimSpace(s) != "" {
				p.Name = strings.TrimSpace(s)
			} else {
				errs = append(errs, fmt.Errorf("name: %v is not a plugin name", item.Value))
			}
		case "maxVersion":
			errs = append(errs, p.parseMaxVersion(item.Value)...)
		case "unimplemented":
			// After maxVersion, whose value the check of each feature reads.
		case "enforcing":
			errs = append(errs, p.parseEnforcing(item.Value)...)
		default:
			errs = append(errs, fmt.Errorf("%v: unknown key; the keys are name, maxVersion, unimplemented, enforcing", item.Key))
		}
	}
	for _, item := range doc {
		if item.Key == "unimplemented" {
			errs = append(errs, p.parseUnimplemented(item.Value)...)
			break
		}
	}
	if !seen["name"] {
		errs = append(errs, errors.New("name: required, names the plugin in condition messages"))
	}
	if !seen["maxVersion"] {
		errs = append(errs, errors.New(`maxVersion: required, the newest NetworkPolicy version the plugin knows, such as "1.8"`))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrProfile, errors.Join(errs...))
	}
	return p, nil
}

// unimplementedIn lists the names of the features of s the profile does not
// implement.
func (p *Profile) unimplementedIn(s Features) []string {
	return (s & p.Unimplemented).Names()
}
