package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Options configure one chaos run. The defaults are `make chaos`'s full run;
// `make chaos-short` passes a small one.
type Options struct {
	// Repo is the podslo checkout, for deploy/kwok. Default "../..", the
	// repository root seen from hack/chaos.
	Repo string
	// Podslo is the exporter binary. Default "<Repo>/bin/podslo".
	Podslo string
	// Testbin holds etcd and kube-apiserver; Kwokbin holds kwok and
	// kwokctl. Defaults: $PODSLO_TESTBIN and $PODSLO_KWOKBIN, as make
	// exports them.
	Testbin, Kwokbin string
	// Workdir holds the kwok cluster, the state filesystem's image, the
	// logs; removed at the end unless Keep. Default: a new directory in
	// $TMPDIR.
	Workdir string
	Keep    bool
	// Pods is the number of pods kept alive during the churn. Default 10000.
	Pods int
	// PodsPerNode sets the number of kwok nodes. Default 100.
	PodsPerNode int
	// CreateRate bounds pod creations per second while the cluster grows
	// to Pods. Default 40.
	CreateRate float64
	// ChurnRate is the pods deleted, and as many created, per second during
	// the churn. Default 3.
	ChurnRate float64
	// Churn is how long the pods churn; every fault happens within it.
	// Default 18m.
	Churn time.Duration
	// Kills is the number of times the exporter is SIGKILLed. Default 20.
	Kills int
	// MaxDown is the longest the exporter stays down after a kill (each
	// down time is drawn from [1s, MaxDown]); pods are deleted during the
	// longer ones. Default 12s.
	MaxDown time.Duration
	// Outage is how long kube-apiserver is stopped, once; 0: never.
	// Default 60s.
	Outage time.Duration
	// Compactions is how many times etcd is compacted at its current
	// revision: the first while kube-apiserver is stopped (so that every
	// watch resumes with a compacted resource version and gets 410 Gone),
	// the others at random points. Default 2.
	Compactions int
	// DiskFull is how long the state filesystem stays full; 0: never.
	// Default 30s.
	DiskFull time.Duration
	// StateFSMiB is the size of the exporter's state filesystem. Default 256.
	StateFSMiB int
	// StateFS is the kind of state filesystem: ext4 (a loop-mounted image)
	// or tmpfs. Default ext4.
	StateFS string
	// SandboxTimeout is the exporter's --sandbox-creation-timeout; at least
	// Outage + 1m. Default 2m30s.
	SandboxTimeout time.Duration
	// MinLife is the shortest time any state the SLIs read stays on a pod:
	// the sandbox crash comes this long after Ready, and a pod is deleted
	// no sooner than this after its last Ready. It must outlast the
	// exporter's longest blind spell (down time plus restart), or the
	// exporter cannot see what the ground truth holds. Default 40s.
	MinLife time.Duration
	// Seed seeds every random choice; 0 picks one (logged).
	Seed int64
	// Out is the JSON results file; Markdown the report. Defaults
	// "results/results.json" and "results/results.md".
	Out, Markdown string
	// Rejudge, if set, is the workdir of a run kept with --keep: its
	// results are judged again and nothing runs.
	Rejudge string
	// SettleTimeout bounds the wait, after the churn, for every pod and
	// the exporter to settle. Default 15m.
	SettleTimeout time.Duration
}

func parseOptions(args []string) (*Options, error) {
	o := &Options{}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.StringVar(&o.Repo, "repo", "../..", "podslo repository root")
	fs.StringVar(&o.Podslo, "podslo", "", "podslo binary (default <repo>/bin/podslo)")
	fs.StringVar(&o.Testbin, "testbin", os.Getenv("PODSLO_TESTBIN"), "directory of etcd and kube-apiserver")
	fs.StringVar(&o.Kwokbin, "kwokbin", os.Getenv("PODSLO_KWOKBIN"), "directory of kwok and kwokctl")
	fs.StringVar(&o.Workdir, "workdir", "", "cluster, state image and logs (default: a new temporary directory)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the workdir (logs) after the run")
	fs.IntVar(&o.Pods, "pods", 10000, "pods kept alive during the churn")
	fs.IntVar(&o.PodsPerNode, "pods-per-node", 100, "one kwok node per this many pods")
	fs.Float64Var(&o.CreateRate, "create-rate", 40, "pod creations per second while growing to --pods")
	fs.Float64Var(&o.ChurnRate, "churn-rate", 3, "pods deleted (and created) per second during the churn")
	fs.DurationVar(&o.Churn, "churn", 18*time.Minute, "how long the pods churn; the faults happen within")
	fs.IntVar(&o.Kills, "kills", 20, "exporter SIGKILLs")
	fs.DurationVar(&o.MaxDown, "max-down", 12*time.Second, "longest down time after a kill")
	fs.DurationVar(&o.Outage, "outage", time.Minute, "kube-apiserver stopped this long, once (0: never)")
	fs.IntVar(&o.Compactions, "compactions", 2, "etcd compactions (the first during the outage)")
	fs.DurationVar(&o.DiskFull, "disk-full", 30*time.Second, "the state filesystem stays full this long, once (0: never)")
	fs.IntVar(&o.StateFSMiB, "state-fs-mib", 256, "size of the exporter's state filesystem")
	fs.StringVar(&o.StateFS, "state-fs", stateFSExt4, "the exporter's state filesystem: ext4 (a loop-mounted image) or tmpfs")
	fs.DurationVar(&o.SandboxTimeout, "sandbox-timeout", 150*time.Second, "the exporter's --sandbox-creation-timeout")
	fs.DurationVar(&o.MinLife, "min-life", 40*time.Second, "shortest life of any pod state the SLIs read")
	fs.Int64Var(&o.Seed, "seed", 0, "random seed (0: pick one)")
	fs.StringVar(&o.Out, "out", "results/results.json", "JSON results")
	fs.StringVar(&o.Markdown, "markdown", "results/results.md", "markdown report")
	fs.StringVar(&o.Rejudge, "rejudge", "", "judge again the run kept (--keep) in this workdir; nothing runs")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", 15*time.Minute, "wait at most this long for the pods and the exporter to settle")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Podslo == "" {
		o.Podslo = filepath.Join(o.Repo, "bin", "podslo")
	}
	return o, nil
}

// Validate reports the first option that cannot work.
func (o *Options) Validate() error {
	if o.Rejudge != "" {
		return nil
	}
	for _, f := range []struct{ flag, path string }{
		{"--podslo", o.Podslo},
		{"--testbin", filepath.Join(o.Testbin, "kube-apiserver")},
		{"--testbin", filepath.Join(o.Testbin, "etcd")},
		{"--kwokbin", filepath.Join(o.Kwokbin, "kwokctl")},
		{"--kwokbin", filepath.Join(o.Kwokbin, "kwok")},
		{"--repo", filepath.Join(o.Repo, "deploy", "kwok", "pod-stages.yaml")},
	} {
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	switch {
	case o.Pods < 20:
		return errors.New("--pods must be at least 20")
	case o.PodsPerNode <= 0 || o.PodsPerNode > 110:
		return errors.New("--pods-per-node must be in [1, 110]")
	case o.CreateRate <= 0 || o.ChurnRate <= 0:
		return errors.New("--create-rate and --churn-rate must be positive")
	case o.Kills < 0 || o.Compactions < 0:
		return errors.New("--kills and --compactions must not be negative")
	case o.MaxDown < time.Second:
		return errors.New("--max-down must be at least 1s")
	case o.Outage < 0 || o.DiskFull < 0:
		return errors.New("--outage and --disk-full must not be negative")
	case o.SandboxTimeout < 10*time.Second || o.SandboxTimeout%time.Second != 0:
		return errors.New("--sandbox-timeout must be whole seconds, at least 10s")
	case o.MinLife < 10*time.Second:
		return errors.New("--min-life must be at least 10s")
	case o.MinLife <= o.MaxDown+5*time.Second:
		return fmt.Errorf("--min-life (%s) must exceed --max-down (%s) by more than 5s, the restart", o.MinLife, o.MaxDown)
	case o.Outage > 0 && o.SandboxTimeout < o.Outage+time.Minute:
		// The stuck pods made just before the outage and replaced after it
		// must time out only once the exporter watches again (about 20 to
		// 55 s after the API server returns), or their phantom timeouts
		// could not be told from the exporter's blindness.
		return fmt.Errorf("--sandbox-timeout (%s) must exceed --outage (%s) by at least 1m", o.SandboxTimeout, o.Outage)
	case o.StateFSMiB < 32:
		return errors.New("--state-fs-mib must be at least 32")
	case o.StateFS != stateFSExt4 && o.StateFS != stateFSTmpfs:
		return fmt.Errorf("--state-fs %q: want %s or %s", o.StateFS, stateFSExt4, stateFSTmpfs)
	case os.Geteuid() != 0:
		return errors.New("the chaos run mounts the exporter's state filesystem (a loop-mounted ext4 image) and must run as root")
	}
	if need := o.faultTime(); need > o.Churn {
		return fmt.Errorf("--churn %s is too short for the faults: they need about %s", o.Churn, need.Round(time.Second))
	}
	return nil
}

// Spacing of the faults: before each, deletions pause for pauseBefore so
// that every termination in flight completes while the exporter still
// watches (deploy/kwok takes the sandbox down at most 4 s after the
// request and removes the pod 1 s later; the rest is for a busy kwok), and
// each fault gets room after it.
const (
	pauseBefore = 8 * time.Second
	// The room each fault takes: a kill, the down time and the restart;
	// the outage and the exporter's return to its watch; the full disk and
	// a crash loop's end.
	killRoom     = 15 * time.Second
	diskFullRoom = 30 * time.Second
)

// outageRoom is the room after the outage: the exporter's return to its
// watch (client-go backs off for up to 30 s, and a relist of 10k pods takes
// more), then a sandbox timeout and more without a restart, so that the
// timeouts of pods replaced under their names while its watch was down
// would show.
func (o *Options) outageRoom() time.Duration {
	return max(45*time.Second, o.SandboxTimeout+30*time.Second)
}

// faultTime is about how long the faults take back to back.
func (o *Options) faultTime() time.Duration {
	d := time.Duration(o.Kills) * (pauseBefore + o.MaxDown + killRoom)
	if o.Outage > 0 {
		d += pauseBefore + o.Outage + o.outageRoom()
	}
	if o.DiskFull > 0 {
		d += pauseBefore + o.DiskFull + diskFullRoom
	}
	return d
}
