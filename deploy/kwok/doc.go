// Package kwok holds podslo's kwok stages (pod-stages.yaml), which fake the
// kubelet for the demo, the end-to-end test and the chaos runs, the classes
// they read (classes.yaml) with the one code that creates them
// (ApplyClasses: the demo, hack/chaos, hack/scale and stagecheck), and the
// test that replays the real kubelet's recorded sequences through them.
package kwok
