// Package lifecycle is the pure step of podslo's data flow
// (informers → lifecycle → store → collectors): given a pod and what was
// remembered about its UID, it decides which SLI observations are new.
package lifecycle
