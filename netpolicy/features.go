package netpolicy

import (
	"fmt"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
)

// Version is a NetworkPolicy version in KEP-2136's sense: the Kubernetes
// release, always 1.x, whose NetworkPolicy functionality a policy needs. It
// holds the minor number.
type Version uint16

// String is the version as KEP-2136 writes it, e.g. "1.11".
func (v Version) String() string { return "1." + strconv.Itoa(int(v)) }

var versionRE = regexp.MustCompile(`^1\.(0|[1-9][0-9]{0,3})$`)

// ParseVersion takes "1.N" exactly: no patch release, no "v", no leading
// zeros. NetworkPolicy began in 1.3, so older versions are refused.
func ParseVersion(s string) (Version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a version: want 1.N, such as \"1.8\"", s)
	}
	n, _ := strconv.Atoi(m[1]) // at most 4 digits
	if n < int(Base) {
		return 0, fmt.Errorf("%q is older than NetworkPolicy itself (%s)", s, Base)
	}
	return Version(n), nil
}

// Base is the version of every policy: NetworkPolicy's first release.
const Base Version = 3

// Feature is one NetworkPolicy feature a policy can use, as a bit of
// Features.
type Feature uint16

// Features is a set of Feature bits.
type Features uint16

// The features, in the order of the table. Their names, versions and
// sources are in Table and docs/networkpolicy.md.
const (
	Ingress Feature = 1 << iota
	PodSelector
	NamespaceSelector
	Ports
	NamedPorts
	Egress
	IPBlock
	IPv6
	PodAndNamespaceSelector
	SCTP
	EndPort
	NamespaceByName
	numFeatures = iota
)

// FeatureInfo is one row of the feature table.
type FeatureInfo struct {
	Feature Feature
	// Name is how profiles and messages call it.
	Name string
	// Version is the release that first carried the feature in the API,
	// alpha included, as KEP-2136 counts (its 1.9 and 1.12 were alpha).
	Version Version
}

// Table lists every feature podslo recognizes. KEP-2136's own table gives
// 1.3, 1.8, 1.9, 1.11 and 1.12; the rest came later (docs/networkpolicy.md
// cites each source).
var Table = []FeatureInfo{
	{Ingress, "ingress", 3},
	{PodSelector, "podSelector", 3},
	{NamespaceSelector, "namespaceSelector", 3},
	// TCP and UDP ports, by number (or every port of the protocol).
	{Ports, "ports", 3},
	// Named ports were in the first API already (extensions/v1beta1 in
	// 1.3: "a numerical or named port on a pod"); listed of their own
	// because plugins have implemented them late or not at all.
	{NamedPorts, "namedPorts", 3},
	{Egress, "egress", 8},
	{IPBlock, "ipBlock", 8},
	{IPv6, "ipv6", 9},
	{PodAndNamespaceSelector, "podAndNamespaceSelector", 11},
	{SCTP, "sctp", 12},
	// NetworkPolicyEndPort: alpha 1.21, beta 1.22, GA 1.25 (KEP-2079).
	{EndPort, "endPort", 21},
	// The kubernetes.io/metadata.name namespace label: beta 1.21, GA 1.22
	// (KEP-2161).
	{NamespaceByName, "namespaceByName", 21},
}

// NamespaceNameLabel is the label the API server sets on every namespace
// since 1.21, which lets a namespaceSelector select namespaces by name.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

func init() {
	// The table must cover each bit once, in bit order: Names and
	// MinVersion index it by bit position.
	if len(Table) != numFeatures {
		panic(fmt.Sprintf("netpolicy: feature table has %d rows for %d features", len(Table), numFeatures))
	}
	for i, row := range Table {
		if row.Feature != 1<<i {
			panic(fmt.Sprintf("netpolicy: feature table row %d (%s) out of bit order", i, row.Name))
		}
		// Versions relies on the rows being oldest first.
		if i > 0 && row.Version < Table[i-1].Version {
			panic(fmt.Sprintf("netpolicy: feature table row %d (%s) older than the row before", i, row.Name))
		}
	}
}

// FeatureByName returns the feature called name in Table.
func FeatureByName(name string) (FeatureInfo, bool) {
	for _, row := range Table {
		if row.Name == name {
			return row, true
		}
	}
	return FeatureInfo{}, false
}

// FeatureNames lists every feature name, in table order.
func FeatureNames() []string {
	out := make([]string, len(Table))
	for i, row := range Table {
		out[i] = row.Name
	}
	return out
}

// Has reports whether f is in the set.
func (s Features) Has(f Feature) bool { return s&Features(f) != 0 }

func (s *Features) add(f Feature) { *s |= Features(f) }

// rows returns the table rows of the features in s, in table order.
func (s Features) rows() []FeatureInfo {
	out := make([]FeatureInfo, 0, bits.OnesCount16(uint16(s)))
	for _, row := range Table {
		if s.Has(row.Feature) {
			out = append(out, row)
		}
	}
	return out
}

// Names lists the names of the features in s, in table order.
func (s Features) Names() []string {
	rows := s.rows()
	out := make([]string, len(rows))
	for i, row := range rows {
		out[i] = row.Name
	}
	return out
}

// String is the comma-separated names.
func (s Features) String() string { return strings.Join(s.Names(), ",") }

// MinVersion is KEP-2136's minVersion of a policy using s: the newest
// version among its features, and at least Base.
func (s Features) MinVersion() Version {
	v := Base
	for _, row := range s.rows() {
		v = max(v, row.Version)
	}
	return v
}

// newest returns the features of s whose version is v.
func (s Features) newest(v Version) Features {
	var out Features
	for _, row := range s.rows() {
		if row.Version == v {
			out.add(row.Feature)
		}
	}
	return out
}

// Versions lists every version a policy's minVersion can be, oldest first:
// the bounded values of the min_version label.
func Versions() []Version {
	var out []Version
	for _, row := range Table {
		if len(out) == 0 || out[len(out)-1] != row.Version {
			out = append(out, row.Version)
		}
	}
	return out
}
