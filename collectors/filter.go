package collectors

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// FamilyFilter keeps the metric families an operator allows, as
// kube-state-metrics' --metric-allowlist and --metric-denylist: each
// pattern is a regular expression that must match a whole family name. A
// nil *FamilyFilter keeps everything.
type FamilyFilter struct {
	patterns []*regexp.Regexp
	allow    bool
}

// NewFamilyFilter builds the filter of an allowlist or a denylist (not
// both). A pattern that does not parse is an error, and so is one of
// podslo's own families (its literal prefix starts with podslo_) that
// matches none of them: a misspelt or renamed name would otherwise drop
// nothing, or everything, without a word. It returns nil for two empty
// lists.
func NewFamilyFilter(allow, deny []string) (*FamilyFilter, error) {
	if len(allow) > 0 && len(deny) > 0 {
		return nil, errors.New("--metric-allowlist and --metric-denylist are exclusive: give one")
	}
	f := &FamilyFilter{allow: len(allow) > 0}
	list, flag := deny, "--metric-denylist"
	if f.allow {
		list, flag = allow, "--metric-allowlist"
	}
	if len(list) == 0 {
		return nil, nil
	}
	var errs []error
	for _, p := range list {
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: %w", flag, p, err))
			continue
		}
		if prefix, _ := re.LiteralPrefix(); strings.HasPrefix(prefix, "podslo_") && !matchesAny(re) {
			errs = append(errs, fmt.Errorf("%s: %q matches no family podslo exports (docs/metrics.md lists them)", flag, p))
			continue
		}
		f.patterns = append(f.patterns, re)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

func matchesAny(re *regexp.Regexp) bool {
	for _, fam := range All() {
		if re.MatchString(fam.Name) {
			return true
		}
	}
	return false
}

// Keep reports whether the family named name is exposed.
func (f *FamilyFilter) Keep(name string) bool {
	if f == nil {
		return true
	}
	for _, re := range f.patterns {
		if re.MatchString(name) {
			return f.allow
		}
	}
	return !f.allow
}

// filter drops the families f does not keep, in place.
func (f *FamilyFilter) filter(mfs []*dto.MetricFamily) []*dto.MetricFamily {
	if f == nil {
		return mfs
	}
	out := mfs[:0]
	for _, mf := range mfs {
		if f.Keep(mf.GetName()) {
			out = append(out, mf)
		}
	}
	return out
}
