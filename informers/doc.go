// Package informers is the first step of podslo's data flow: it watches pods,
// PVCs and StorageClasses, trims them to what the SLIs need, and feeds each pod
// through lifecycle into the store.
package informers
