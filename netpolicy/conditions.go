package netpolicy

import (
	"fmt"
	"strings"
)

// ConditionType is one of KEP-2136's NetworkPolicyStatusConditionTypes.
type ConditionType string

// KEP-2136's condition types.
const (
	TypeSupported ConditionType = "Supported"
	TypeProblem   ConditionType = "Problem"
	TypeEnforcing ConditionType = "Enforcing"
)

// ConditionTypes are the types every policy gets a condition of, in order.
var ConditionTypes = []ConditionType{TypeSupported, TypeProblem, TypeEnforcing}

// Status is a condition status.
type Status string

// Condition statuses, as in metav1.ConditionStatus.
const (
	StatusTrue    Status = "True"
	StatusFalse   Status = "False"
	StatusUnknown Status = "Unknown"
)

// Reasons of the Supported and Enforcing conditions, besides the Problem
// reasons in cidr.go. KEP-2136 names Version and Unimplemented; it leaves
// the others to the implementation.
const (
	// ReasonVersion: the policy's minVersion is newer than the plugin's
	// maxVersion, so the plugin may misread even the parts it sees.
	ReasonVersion = "Version"
	// ReasonUnimplemented: the plugin knows a feature the policy uses but
	// does not implement it.
	ReasonUnimplemented = "Unimplemented"
	// ReasonImplemented: the plugin implements every feature the policy
	// uses.
	ReasonImplemented = "Implemented"
	// ReasonNoProfile: podslo has no profile of the plugin, so it judges
	// nothing.
	ReasonNoProfile = "NoProfile"
	// ReasonProfile: the status is the profile's enforcing value.
	ReasonProfile = "Profile"
	// ReasonNone: a Problem condition that is False.
	ReasonNone = "None"
)

// Condition is one of KEP-2136's NetworkPolicyStatusConditions, as podslo
// computes it (it never writes it to the API).
type Condition struct {
	Type    ConditionType
	Status  Status
	Reason  string
	Message string
}

// Conditions returns the policy's Supported, Problem and Enforcing
// conditions under profile, which may be nil: without a profile, podslo
// judges nothing about support or enforcement, and says so.
func Conditions(p *Policy, profile *Profile) [3]Condition {
	return [3]Condition{supported(p, profile), problem(p), enforcing(profile)}
}

func supported(p *Policy, profile *Profile) Condition {
	c := Condition{Type: TypeSupported}
	if profile == nil {
		c.Status, c.Reason = StatusUnknown, ReasonNoProfile
		c.Message = "No network plugin profile (--network-plugin-profile): podslo cannot tell whether the plugin supports this policy"
		return c
	}
	min := p.MinVersion()
	if min > profile.MaxVersion {
		c.Status, c.Reason = StatusFalse, ReasonVersion
		c.Message = fmt.Sprintf("Needs NetworkPolicy %s (%s), newer than %s's maxVersion %s: the plugin may misread the policy",
			min, strings.Join(p.Features.newest(min).Names(), ", "), profile.Name, profile.MaxVersion)
		return c
	}
	if missing := profile.unimplementedIn(p.Features); len(missing) > 0 {
		c.Status, c.Reason = StatusFalse, ReasonUnimplemented
		c.Message = fmt.Sprintf("Uses %s, which %s does not implement", strings.Join(missing, ", "), profile.Name)
		return c
	}
	c.Status, c.Reason = StatusTrue, ReasonImplemented
	c.Message = fmt.Sprintf("%s implements every feature the policy uses (NetworkPolicy %s)", profile.Name, min)
	return c
}

func problem(p *Policy) Condition {
	if len(p.Problems) == 0 {
		return Condition{Type: TypeProblem, Status: StatusFalse, Reason: ReasonNone, Message: "No problem found in the policy's CIDRs"}
	}
	c := Condition{Type: TypeProblem, Status: StatusTrue}
	msgs := make([]string, len(p.Problems))
	for i, pr := range p.Problems {
		msgs[i] = pr.Message
	}
	for _, r := range problemOrder {
		for _, pr := range p.Problems {
			if pr.Reason == r && c.Reason == "" {
				c.Reason = r
			}
		}
	}
	c.Message = strings.Join(msgs, "; ")
	return c
}

func enforcing(profile *Profile) Condition {
	c := Condition{Type: TypeEnforcing, Status: StatusUnknown}
	switch {
	case profile == nil:
		c.Reason = ReasonNoProfile
		c.Message = "No network plugin profile (--network-plugin-profile): podslo cannot tell whether the plugin enforces this policy"
	case profile.Enforcing == StatusFalse:
		c.Status, c.Reason = StatusFalse, ReasonProfile
		c.Message = fmt.Sprintf("%s enforces no NetworkPolicy", profile.Name)
	default:
		c.Reason = ReasonProfile
		c.Message = fmt.Sprintf("%s cannot tell when a policy is in effect", profile.Name)
	}
	return c
}

// SupportedLabel is the supported label of podslo_networkpolicies: the
// Supported condition's status in lower case.
func SupportedLabel(s Status) string { return strings.ToLower(string(s)) }
