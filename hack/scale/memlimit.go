package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// memoryQuantity is the chart's grammar for a memory limit
// (charts/podslo/values.schema.json and podslo.gomemlimit in
// charts/podslo/templates/_helpers.tpl): a number with an optional Ki, Mi,
// Gi, Ti, k, M, G or T. The harness accepts exactly what the chart accepts.
var memoryQuantity = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$`)

var quantityUnits = map[string]int64{
	"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
}

// memoryLimit is a --podslo-memory-limit: the quantity as given, the hard
// limit of each podslo's cgroup and the GOMEMLIMIT it runs with.
type memoryLimit struct {
	Quantity   string
	Bytes      int64
	GOMEMLIMIT int64
}

// parseMemoryLimit parses q as the chart does and derives GOMEMLIMIT from
// it as podslo.gomemlimit does.
func parseMemoryLimit(q string) (memoryLimit, error) {
	m := memoryQuantity.FindStringSubmatch(q)
	if m == nil {
		return memoryLimit{}, fmt.Errorf("%q is not a memory quantity the chart understands (a number with an optional suffix Ki, Mi, Gi, Ti, k, M, G or T)", q)
	}
	num, mult := m[1], quantityUnits[m[2]]
	var bytes, gomemlimit int64
	if strings.Contains(num, ".") {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return memoryLimit{}, fmt.Errorf("%q: %w", q, err)
		}
		if f*float64(mult) >= math.MaxInt64 {
			return memoryLimit{}, fmt.Errorf("%q is too large", q)
		}
		// The kubelet rounds a fractional byte count up
		// (resource.Quantity.Value); the chart takes the floor of 90%
		// in floating point: floor(num × mult × 9 / 10).
		bytes = int64(math.Ceil(f * float64(mult)))
		gomemlimit = int64(math.Floor(f * float64(mult) * 9 / 10))
	} else {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return memoryLimit{}, fmt.Errorf("%q: %w", q, err)
		}
		if n > math.MaxInt64/mult/9 {
			return memoryLimit{}, fmt.Errorf("%q is too large", q)
		}
		// The chart's integer path: num × mult × 9 / 10, truncated.
		bytes = n * mult
		gomemlimit = n * mult * 9 / 10
	}
	if bytes <= 0 {
		return memoryLimit{}, fmt.Errorf("%q: a memory limit must be positive", q)
	}
	return memoryLimit{Quantity: q, Bytes: bytes, GOMEMLIMIT: gomemlimit}, nil
}

// cgroupVersion says which memory controller the harness found.
type cgroupVersion int

const (
	cgroupV1 cgroupVersion = 1
	cgroupV2 cgroupVersion = 2
)

// memoryController is where the memory controller is mounted.
type memoryController struct {
	Version cgroupVersion
	Root    string // mount point of the hierarchy
}

// findMemoryController reads /proc/self/mounts: a cgroup (v1) mount with the
// memory option, or a cgroup2 mount whose cgroup.controllers lists memory.
// A cgroup2 mount without the memory controller (as /sys/fs/cgroup/unified
// beside v1 controllers) does not count.
func findMemoryController(mounts string, controllers func(root string) (string, error)) (memoryController, error) {
	var v2 []string
	for line := range strings.SplitSeq(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		switch f[2] {
		case "cgroup":
			if hasField(f[3], ",", "memory") {
				return memoryController{Version: cgroupV1, Root: f[1]}, nil
			}
		case "cgroup2":
			v2 = append(v2, f[1])
		}
	}
	var errs []error
	for _, root := range v2 {
		c, err := controllers(root)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if hasField(c, " ", "memory") {
			return memoryController{Version: cgroupV2, Root: root}, nil
		}
		errs = append(errs, fmt.Errorf("cgroup2 at %s has no memory controller (cgroup.controllers: %q)", root, strings.TrimSpace(c)))
	}
	return memoryController{}, fmt.Errorf("no memory cgroup controller mounted (neither a cgroup v1 memory hierarchy nor cgroup2 with memory): %w", errors.Join(errs...))
}

func hasField(s, sep, want string) bool {
	for f := range strings.SplitSeq(strings.TrimSpace(s), sep) {
		if strings.TrimSpace(f) == want {
			return true
		}
	}
	return false
}

func detectMemoryController() (memoryController, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return memoryController{}, err
	}
	return findMemoryController(string(b), func(root string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		return string(b), err
	})
}

// cgroupPrefix names the harness's cgroups, followed by the harness's pid,
// so that groups left by a harness that was SIGKILLed can be recognised
// and removed by the next run.
const cgroupPrefix = "podslo-scale-"

// memCgroup is the memory cgroup one podslo process runs in.
type memCgroup struct {
	ctl   memoryController
	Path  string
	limit memoryLimit

	stopSampling chan struct{}
	sampled      sync.WaitGroup
	mu           sync.Mutex
	peakWS       int64 // the largest working set sampled
	samples      int
}

// newMemCgroup makes a cgroup named name directly under the controller's
// root with limit as its hard limit (no swap: the v1 memsw limit is left
// alone, and kwok's machine has none). Groups go under the root, not under
// the harness's own group, because on cgroup v2 a group with processes
// cannot give the memory controller to children.
func newMemCgroup(ctl memoryController, name string, limit memoryLimit) (*memCgroup, error) {
	c := &memCgroup{ctl: ctl, Path: filepath.Join(ctl.Root, name), limit: limit}
	if ctl.Version == cgroupV2 {
		// The root's children get the memory controller only if the
		// root hands it down.
		sub, err := os.ReadFile(filepath.Join(ctl.Root, "cgroup.subtree_control"))
		if err != nil {
			return nil, fmt.Errorf("cgroup2: %w", err)
		}
		if !hasField(string(sub), " ", "memory") {
			if err := os.WriteFile(filepath.Join(ctl.Root, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
				return nil, fmt.Errorf("cgroup2: enable the memory controller for %s's children: %w", ctl.Root, err)
			}
		}
	}
	if err := os.Mkdir(c.Path, 0o755); err != nil {
		return nil, fmt.Errorf("create memory cgroup: %w", err)
	}
	file, value := "memory.limit_in_bytes", strconv.FormatInt(limit.Bytes, 10)
	if ctl.Version == cgroupV2 {
		file = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(c.Path, file), []byte(value), 0); err != nil {
		return nil, errors.Join(fmt.Errorf("set %s/%s to %s: %w", c.Path, file, value, err), c.remove())
	}
	return c, nil
}

// startSampling samples the working set every period until stop.
func (c *memCgroup) startSampling(period time.Duration) {
	c.stopSampling = make(chan struct{})
	c.sampled.Add(1)
	go func() {
		defer c.sampled.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			c.sample()
			select {
			case <-c.stopSampling:
				return
			case <-t.C:
			}
		}
	}()
}

// sample records the working set if it is the largest so far and returns it.
func (c *memCgroup) sample() (int64, error) {
	ws, err := c.workingSet()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.peakWS = max(c.peakWS, ws)
	c.samples++
	c.mu.Unlock()
	return ws, nil
}

func (c *memCgroup) read(file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.Path, file))
	return string(b), err
}

func (c *memCgroup) readInt(file string) (int64, error) {
	s, err := c.read(file)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", c.Path, file, err)
	}
	return n, nil
}

// workingSet is what the kubelet (cAdvisor) calls the container's working
// set and evicts on: usage less inactive file pages. Badger's files are
// read through the page cache, which is charged to the cgroup but
// reclaimed before the OOM killer acts.
func (c *memCgroup) workingSet() (int64, error) {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if c.ctl.Version == cgroupV2 {
		usageFile, inactiveKey = "memory.current", "inactive_file"
	}
	usage, err := c.readInt(usageFile)
	if err != nil {
		return 0, err
	}
	stat, err := c.read("memory.stat")
	if err != nil {
		return 0, err
	}
	inactive, err := statValue(stat, inactiveKey)
	if err != nil {
		return 0, fmt.Errorf("%s/memory.stat: %w", c.Path, err)
	}
	return max(usage-inactive, 0), nil
}

// statValue reads key's value from a flat keyed file: memory.stat,
// memory.events, v1's memory.oom_control ("key value" lines).
func statValue(text, key string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s", key)
}

// oomKills is the number of processes the OOM killer killed in the group:
// oom_kill in v1's memory.oom_control (Linux 4.13 and later) or in v2's
// memory.events.
func (c *memCgroup) oomKills() (int64, error) {
	file := "memory.oom_control"
	if c.ctl.Version == cgroupV2 {
		file = "memory.events"
	}
	s, err := c.read(file)
	if err != nil {
		return 0, err
	}
	n, err := statValue(s, "oom_kill")
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", c.Path, file, err)
	}
	return n, nil
}

// result reads the group's figures; settled and afterScrapes are filled in
// by the caller.
func (c *memCgroup) result() (*MemcgResult, error) {
	if _, err := c.sample(); err != nil {
		return nil, err
	}
	r := &MemcgResult{CgroupVersion: int(c.ctl.Version), Limit: c.limit.Quantity, LimitBytes: c.limit.Bytes, GOMEMLIMIT: c.limit.GOMEMLIMIT}
	var err error
	if r.OOMKills, err = c.oomKills(); err != nil {
		return nil, err
	}
	// How often usage hit the limit and the kernel had to reclaim: a
	// group that stays at its limit without an OOM kill thrashes instead.
	if c.ctl.Version == cgroupV2 {
		var events string
		if events, err = c.read("memory.events"); err == nil {
			r.LimitHits, err = statValue(events, "max")
		}
	} else {
		r.LimitHits, err = c.readInt("memory.failcnt")
	}
	if err != nil {
		return nil, err
	}
	peakFile := "memory.max_usage_in_bytes"
	if c.ctl.Version == cgroupV2 {
		// Linux 5.19 and later.
		peakFile = "memory.peak"
	}
	if r.PeakUsageBytes, err = c.readInt(peakFile); err != nil {
		return nil, err
	}
	c.mu.Lock()
	r.PeakWorkingSetBytes, r.WorkingSetSamples = c.peakWS, c.samples
	c.mu.Unlock()
	return r, nil
}

// contains reports whether pid is in the group, from /proc/<pid>/cgroup.
func (c *memCgroup) contains(pid int) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(c.ctl.Root, c.Path)
	if err != nil {
		return false, err
	}
	want := "/" + rel
	for line := range strings.SplitSeq(string(b), "\n") {
		// hierarchy-ID:controllers:path; v2's line is 0::path.
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if (c.ctl.Version == cgroupV1 && hasField(f[1], ",", "memory")) || (c.ctl.Version == cgroupV2 && f[0] == "0") {
			return f[2] == want, nil
		}
	}
	return false, nil
}

// remove stops sampling and removes the group once its processes are gone;
// the kernel moves its remaining page-cache charges to the parent.
func (c *memCgroup) remove() error {
	if c.stopSampling != nil {
		close(c.stopSampling)
		c.sampled.Wait()
		c.stopSampling = nil
	}
	var err error
	// A process that has just been reaped may still be leaving the group.
	for range 50 {
		if err = syscall.Rmdir(c.Path); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove memory cgroup %s: %w", c.Path, err)
}

// removeStaleCgroups removes the empty groups that a harness no longer
// running left behind (it was SIGKILLed: its deferred cleanup never ran).
func removeStaleCgroups(ctl memoryController) error {
	dirs, err := filepath.Glob(filepath.Join(ctl.Root, cgroupPrefix+"*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), cgroupPrefix), "-")
		if !ok {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // that harness is still running
		}
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove stale memory cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}
