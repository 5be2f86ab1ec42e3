// Package informers is the first step of podslo's data flow: it watches pods,
// PVCs, StorageClasses and FailedMount events, trims them to what the SLIs
// need, and hands each pod to the next stage (the pipeline).
package informers
