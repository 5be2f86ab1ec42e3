package lifecycle

import "slices"

// Skips returns every SLI and reason pair, in order: the skip counter's
// series are created at 0 for each, so that increase() sees a first skip.
func Skips() []Skip {
	out := make([]Skip, 0, int(numSLIs)*int(numReasons))
	for s := SLI(0); s < numSLIs; s++ {
		for r := Reason(0); r < numReasons; r++ {
			out = append(out, Skip{SLI: s, Reason: r})
		}
	}
	return out
}

// MeasuredSLIs returns every SLI that has a histogram, in order: those
// Kind.SLI names.
func MeasuredSLIs() []SLI {
	var out []SLI
	for k := range numKinds {
		if s, ok := k.SLI(); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
